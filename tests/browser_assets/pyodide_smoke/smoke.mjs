// Page side of the smoke test: start the module worker, send it code by id.
const indexURL = new URL(
  new URLSearchParams(location.search).get("indexURL"),
  location.href,
).href;
const workerURL = new URL("worker.mjs", import.meta.url);
workerURL.searchParams.set("indexURL", indexURL);

// Pyodide 314 only runs in module workers.
const worker = new Worker(workerURL, { type: "module" });
const pending = new Map();
let nextId = 0;

worker.addEventListener("message", (event) => {
  const { id, ...reply } = event.data;
  if (id === "ready") {
    document.getElementById("status").textContent = reply.error ? "error" : "ready";
    return;
  }
  pending.get(id)?.(reply);
  pending.delete(id);
});
worker.addEventListener("error", (event) => {
  document.getElementById("status").textContent = "error";
  console.error("worker error", event.message);
});

window.smoke = {
  run(code) {
    const id = nextId++;
    return new Promise((resolve) => {
      pending.set(id, resolve);
      worker.postMessage({ id, code });
    });
  },
};
