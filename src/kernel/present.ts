/** Response formatting shared by every API. */

export const iso = (d: Date): string => d.toISOString();
export const isoOrNull = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

export function page<T>(records: T[], total: number, pageNumber: number, size: number) {
  return { records, total, page: pageNumber, size, pages: Math.ceil(total / size), current: pageNumber };
}
