// Module worker: load Pyodide from ?indexURL= and run Python sent by id.
const indexURL = new URL(self.location.href).searchParams.get("indexURL");

const ready = (async () => {
  const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
  return loadPyodide({ indexURL });
})();

ready.then(
  () => self.postMessage({ id: "ready" }),
  (error) => self.postMessage({ id: "ready", error: String(error) }),
);

self.addEventListener("message", async (event) => {
  const { id, code } = event.data;
  try {
    const pyodide = await ready;
    // Results are converted to plain JS values (numbers, strings, lists).
    let result = await pyodide.runPythonAsync(code);
    if (result && typeof result.toJs === "function") {
      const proxy = result;
      result = proxy.toJs();
      proxy.destroy();
    }
    self.postMessage({ id, result });
  } catch (error) {
    self.postMessage({ id, error: String(error) });
  }
});
