/**
 * A start that cannot go on, with a message that says what to change (the port, the folder, the
 * key). The entry point prints the message alone, without a stack trace, and exits non-zero.
 */
export class StartupError extends Error {}
