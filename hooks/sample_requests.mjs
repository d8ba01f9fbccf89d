// The requests both build scripts run calc on in Pyodide (hooks/stdlib_imports.mjs, to find
// what the stdlib imports late; hooks/pyodide_precompile.mjs, to compile what the first
// requests import and check the answers): a few of each command, good and bad. Python source,
// put at the top level of each script's Python.
export const SAMPLE_REQUESTS_PY = `
PLAN = {"dataset_tokens": 100000000, "gpu": "l40s", "interruptible": True}
SETUPS = [
    {"model": "llama-3.1-8b", "method": "lora"},
    {"model": "llama-2-7b", "method": "qlora", "micro_batch_size": 2, "seq_len": 4096},
    {"model": "llama-3.1-8b", "method": "full", "num_gpus": 2, "sharding": "zero3"},
]
BAD = [{"model": "no-such-model", "seq_len": -1}, "not a request"]
`;
