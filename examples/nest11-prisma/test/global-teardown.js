module.exports = async function teardown() {
  const state = globalThis.__exampleOrdersTest;
  await state?.database.drop();
  await state?.kafka.stop();
};
