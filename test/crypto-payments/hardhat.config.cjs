// Hardhat 2 in-process network for the crypto tests (no compilation: the token artifact is committed).
module.exports = {
  networks: {
    hardhat: {
      chainId: 31337,
      // Blocks are mined by the tests (one per transaction, plus evm_mine for confirmations).
      mining: { auto: true, interval: 0 },
      initialDate: '2026-11-22T09:00:00.000Z',
      accounts: { count: 6 },
      loggingEnabled: false,
    },
  },
  paths: { cache: '../../node_modules/.cache/hardhat-crypto-tests', artifacts: '../../node_modules/.cache/hardhat-crypto-tests/artifacts', sources: './fixtures' },
};
