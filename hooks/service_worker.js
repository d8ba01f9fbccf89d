// Service worker of the calculator (template: hooks/service_worker.py fills in the lists and
// writes it at the site's root, so its scope is the whole site, under GitHub Pages' project
// path too). It keeps what the calculator page needs to show live numbers, the Python
// runtime above all, so a repeat visit does not download it again and works offline.
// - installed once the first visit's numbers are live (boot.js), so its downloads never
//   compete with the first start; they come mostly from the browser's HTTP cache then;
// - one cache per build, named after the build's files: a new deploy's worker fills its own
//   cache and, once active, deletes the caches of older builds;
// - only this origin's GET requests for the listed files are answered; anything else (other
//   pages, search, the snapshot the calculator keeps itself) goes to the network untouched.
//   Files whose name holds a version or a hash are answered from the cache; the pages and
//   the calculator's own scripts go to the network first, the cache only when it fails.

const BUILD = "__BUILD__";
const SCOPE = new URL("./", self.location.href);
const CACHE = `calc-sw-${BUILD}`;
const CACHE_PREFIX = "calc-sw-";
// site-relative paths: [immutable (versioned names)], [fresh (network first)]
const IMMUTABLE = new Set([/* immutable */].map((p) => new URL(p, SCOPE).pathname));
const FRESH = new Set([/* fresh */].map((p) => new URL(p, SCOPE).pathname));

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    await cache.addAll([...IMMUTABLE, ...FRESH]);
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith(CACHE_PREFIX) && name !== CACHE) await caches.delete(name);
    }
  })());
});

async function cacheFirst(request, path) {
  const cached = await caches.match(path, { cacheName: CACHE });
  return cached || fetch(request);
}

async function networkFirst(request, path) {
  try {
    const response = await fetch(request);
    if (response.ok) {
      const copy = response.clone();
      caches.open(CACHE).then((cache) => cache.put(path, copy)).catch(() => {});
    }
    return response;
  } catch (err) {
    const cached = await caches.match(path, { cacheName: CACHE });
    if (!cached) throw err;
    // A copy with no URL of its own: the page or worker keeps the URL it asked for, query
    // included (a shared link's setup; the worker reads its runtime's URLs from its own).
    return new Response(cached.body, cached);
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  // the query (a shared link's setup, the worker's URLs) does not name another file
  const path = url.pathname;
  if (IMMUTABLE.has(path)) event.respondWith(cacheFirst(request, path));
  else if (FRESH.has(path)) event.respondWith(networkFirst(request, path));
});
