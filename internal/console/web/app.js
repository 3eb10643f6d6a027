// Sluice console: a small single-page app over the JSON API in
// /api/v1/. No framework and no build step: pages are functions that
// render into <main>, routes are URL fragments (#/topics/NAME).
//
// To add a page (producers, transactions, users and ACLs): add an entry
// to `pages` with the broker feature that enables it (the `features`
// list of /api/v1/cluster), and a route in `routes`.

const pages = [
  { feature: "overview", title: "Overview", href: "#/" },
  { feature: "topics", title: "Topics", href: "#/topics" },
  { feature: "groups", title: "Consumer groups", href: "#/groups" },
  { feature: "producers", title: "Producers", href: "#/producers" },
  { feature: "transactions", title: "Transactions", href: "#/transactions" },
  { feature: "acls", title: "Users & ACLs", href: "#/acls" },
  { feature: "schemas", title: "Schemas", href: "#/schemas" },
];

const routes = [
  [/^#?\/?$/, overviewPage],
  [/^#\/topics$/, topicsPage],
  [/^#\/topics\/([^/]+)$/, topicPage],
  [/^#\/groups$/, groupsPage],
  [/^#\/groups\/([^/]+)$/, groupPage],
  [/^#\/schemas$/, schemasPage],
  [/^#\/schemas\/([^/]+)$/, subjectPage],
];

let cluster = null; // last /api/v1/cluster answer
let timers = []; // refresh timers of the current page
let charts = []; // uPlot instances of the current page

// ---- helpers ----

async function api(path, opts) {
  // From the origin: on a page opened as http://user:pass@host/, fetch
  // refuses a relative URL, which would carry the credentials.
  const r = await fetch(location.origin + "/api/v1/" + path, opts);
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new Error((body && body.error) || r.status + " " + r.statusText);
  return body;
}

function post(path, method, obj) {
  return api(path, {
    method,
    headers: obj ? { "Content-Type": "application/json" } : {},
    body: obj ? JSON.stringify(obj) : undefined,
  });
}

// el builds an element: el("a", {href: "#/"}, "text", child, ...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

// fill replaces node's children, skipping null and false.
function fill(node, ...kids) {
  node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map((h) => {
      const num = h.startsWith("#");
      return el("th", { class: num ? "num" : null }, num ? h.slice(1) : h);
    }))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, "None"))));
}

function row(...cells) {
  return el("tr", {}, cells.map((c) => (c instanceof Node && c.tagName === "TD") ? c : el("td", {}, c)));
}

function num(v) { return el("td", { class: "num" }, typeof v === "number" ? v.toLocaleString("en-US") : v); }

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function duration(ms) {
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s %= 86400;
  const h = Math.floor(s / 3600); s %= 3600;
  const m = Math.floor(s / 60); s %= 60;
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + s + "s";
}

// hiddenCell marks a value the user's ACLs do not let it see.
function hiddenCell() { return el("span", { class: "muted", title: "needs DESCRIBE_CONFIGS on the topic" }, "hidden"); }

function retention(ms) {
  const n = Number(ms);
  if (!ms || n < 0) return "forever";
  return duration(n).replace(/ 0m 0s$/, "").replace(/ 0s$/, "");
}

function card(k, v, id) { return el("div", { class: "card", id }, el("div", { class: "k" }, k), el("div", { class: "v" }, v)); }

function every(ms, f) {
  const t = setInterval(() => f().catch(showError), ms);
  timers.push(t);
}

function showError(e) {
  const s = document.getElementById("status");
  s.textContent = String(e.message || e);
  s.className = "status bad";
}

function refreshMs() { return Math.max(1000, cluster ? cluster.sample_ms : 2000); }

// ---- charts ----

const palette = ["#1f6feb", "#e8590c", "#2f9e44", "#ae3ec9", "#c92a2a", "#0c8599", "#f08c00", "#5f3dc4", "#868e96", "#d6336c", "#66a80f", "#364fc7", "#a61e4d", "#087f5b", "#e67700", "#495057"];

// timeAxis labels the x axis HH:MM:SS at whole-second steps at least
// 100 px apart, so that neighbouring labels never overlap (uPlot's
// default mixes dates and milliseconds into labels of varying width).
const timeAxis = {
  space: 100,
  incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400],
  values: (_, vs) => vs.map((v) => new Date(v * 1000).toLocaleTimeString("en-GB", { hour12: false })),
};

// chart draws series (objects {name, label, scale}) from a history
// answer into a card; it returns an update function.
function chart(parent, title, defs, unit) {
  const box = el("div", { class: "chart", "data-chart": title });
  parent.append(box);
  box.append(el("div", { class: "title" }, title));
  let u = null;
  const fmt = unit === "bytes" ? (v) => bytes(v) + "/s"
    : unit === "ms" ? (v) => (v === null ? "–" : v.toFixed(2) + " ms")
    : (v) => (v === null ? "–" : Number(v.toFixed(2)).toLocaleString("en-US"));
  return function update(h) {
    const names = defs === "all" ? Object.keys(h.series).sort() : defs.map((d) => d.name);
    const labels = defs === "all" ? names.map((n) => n.replace(/^requests\./, "")) : defs.map((d) => d.label);
    const xs = h.times.map((t) => t / 1000);
    const scale = unit === "ms" ? 1000 : 1;
    const data = [xs, ...names.map((n) => (h.series[n] || xs.map(() => null)).map((v) => v === null ? null : v * scale))];
    let points = 0;
    for (const s of data.slice(1)) for (const v of s) if (v !== null) points++;
    box.dataset.points = points;
    const key = names.join(",");
    if (!u || u._key !== key) {
      if (u) u.destroy();
      const width = Math.max(300, box.clientWidth - 16);
      u = new uPlot({
        width, height: 200,
        series: [{}, ...labels.map((l, i) => ({ label: l, stroke: palette[i % palette.length], width: 1.5, spanGaps: true, points: { size: 4 }, value: (_, v) => fmt(v) }))],
        axes: [timeAxis, { size: 70, values: (_, vs) => vs.map((v) => unit === "bytes" ? bytes(v) : unit === "ms" ? v + " ms" : v) }],
        legend: { live: true },
      }, data, box);
      u._key = key;
      box._chart = u; // for the browser tests
      charts.push(u);
    } else {
      u.setData(data);
    }
  };
}

async function history(params) {
  return api("history?" + new URLSearchParams(params));
}

// ---- pages ----

async function overviewPage(main) {
  const c = await api("cluster");
  const cards = el("div", { class: "cards", id: "overview-cards" });
  const grid = el("div", { class: "charts" });
  const stuck = el("div", { id: "stuck-partitions" });
  const quotas = el("div", { id: "client-quotas" });
  main.append(el("h1", {}, "Overview"),
    el("p", { class: "help" }, "This broker's health and traffic. Charts cover the last hour, one point every " + (c.sample_ms / 1000) + " s."),
    cards, stuck, quotas, el("h2", {}, "Live"), grid);
  // Client quotas (sluice quota), with the accounts in use: shown only
  // when some are set and the user may see them.
  const fillQuotas = (d) => {
    if (!d || !d.quotas || !d.quotas.length) { quotas.replaceChildren(); return; }
    const who = (u) => [u.user ? "user=" + u.user : "", u.client_id ? "client-id=" + u.client_id : ""].filter(Boolean).join(", ");
    quotas.replaceChildren(el("h2", {}, "Client quotas"),
      table(["Entity", "Quotas"], d.quotas.map((q) => row(q.entity, Object.entries(q.values).map(([k, v]) => k + "=" + v).join(", ")))),
      d.usage.length ? table(["Quota", "Account", "#Limit", "#Rate", "#Throttled (s)"],
        d.usage.map((u) => row(u.quota, who(u), num(u.limit), num(Math.round(u.rate)), num(Math.round(u.throttle_seconds * 10) / 10)))) : "");
  };
  const quotasOrNone = () => api("quotas").catch(() => null);
  fillQuotas(await quotasOrNone());
  // Partitions whose last stable offset has lagged the high watermark for
  // longer than the transaction timeout bound: a hanging transaction
  // holds read_committed consumers there. Shown only when there are some.
  const fillStuck = (d) => {
    if (!d.partitions.length) { stuck.replaceChildren(); return; }
    stuck.replaceChildren(el("h2", {}, "Stuck transactions"),
      el("p", { class: "help" }, "read_committed consumers of these partitions stop at the last stable offset: a transaction open longer than the transaction timeout holds it. The broker aborts one with no live coordinator state; sluice txn find-hanging and sluice txn abort end one now."),
      table(["Topic", "#Partition", "#Last stable offset", "#High watermark", "#Producer id", "Open for", "Coordinator"],
        d.partitions.map((p) => row(p.topic, num(p.partition), num(p.last_stable_offset), num(p.high_watermark), num(p.producer_id),
          duration(Date.now() - p.open_since_ms), p.coordinator_live ? "live" : "no state"))));
  };
  fillStuck(await api("stuck"));
  const fillCards = (c) => {
    cards.replaceChildren(
      card("Version", c.version),
      card("Uptime", duration(Date.now() - Date.parse(c.started))),
      card("Ready", c.ready ? "yes" : "no: " + c.ready_error),
      card("Data directory", c.data_dir),
      card("Data stored", bytes(c.data_bytes)),
      card("Disk used / free", c.disk_total_bytes ? bytes(c.disk_total_bytes - c.disk_free_bytes) + " / " + bytes(c.disk_free_bytes) : "unknown"),
      card("fsync policy", c.fsync),
      card("Topics / partitions", c.topics + " / " + c.partitions),
      card("Connections", c.connections),
      card("Cluster id", c.cluster_id),
      card("Kafka address", c.addr),
    );
  };
  fillCards(c);
  const charts = [
    [chart(grid, "Records per second", [{ name: "produce.records", label: "produced" }, { name: "fetch.records", label: "fetched" }]), { series: "produce.records,fetch.records" }],
    [chart(grid, "Bytes per second", [{ name: "produce.bytes", label: "produced" }, { name: "fetch.bytes", label: "fetched" }], "bytes"), { series: "produce.bytes,fetch.bytes" }],
    [chart(grid, "fsync latency", [{ name: "fsync.p50", label: "p50" }, { name: "fsync.p99", label: "p99" }], "ms"), { series: "fsync.p50,fsync.p99" }],
    [chart(grid, "Group commit", [{ name: "fsync.appends", label: "appends per fsync" }, { name: "queue.depth", label: "queue depth" }]), { series: "fsync.appends,queue.depth" }],
    [chart(grid, "Requests per second by API", "all"), { prefix: "requests." }],
  ];
  const draw = async () => {
    for (const [update, q] of charts) update(await history(q));
  };
  await draw();
  every(refreshMs(), async () => { fillCards(await api("cluster")); fillStuck(await api("stuck")); fillQuotas(await quotasOrNone()); await draw(); });
}

async function topicsPage(main) {
  const q = el("input", { type: "search", id: "topic-search", placeholder: "Search topics", "aria-label": "Search topics" });
  const holder = el("div", { id: "topics-table" });
  const bar = el("div", { class: "toolbar" }, q);
  main.append(el("h1", {}, "Topics"),
    el("p", { class: "help" }, "A topic is a named stream of records, split into partitions that are each an ordered log."),
    bar, holder);
  if (cluster && cluster.admin) bar.append(createTopicForm());
  let seq = 0; // answers can arrive out of order while the user types: show the latest
  const load = async () => {
    const mine = ++seq;
    const d = await api("topics?" + new URLSearchParams({ q: q.value }));
    if (mine !== seq) return;
    fill(holder, table(["Name", "#Partitions", "#Records", "#Size", "Retention", "Cleanup", "#Produce rec/s"],
      d.topics.map((t) => row(el("a", { href: "#/topics/" + encodeURIComponent(t.name) }, t.name), num(t.partitions), num(t.records),
        num(bytes(t.size_bytes)), t.configs_hidden ? hiddenCell() : retention(t.retention_ms), t.configs_hidden ? hiddenCell() : t.cleanup_policy, num(Number(t.produce_rate.toFixed(1)))))),
    d.total > d.topics.length ? el("p", { class: "muted" }, "Showing " + d.topics.length + " of " + d.total) : null);
  };
  q.addEventListener("input", () => load().catch(showError));
  await load();
  every(refreshMs(), load);
}

function createTopicForm() {
  const name = el("input", { placeholder: "new topic name", id: "new-topic" });
  const parts = el("input", { type: "number", min: 1, value: 1, id: "new-topic-partitions" });
  return el("span", {}, name, parts, el("button", {
    onclick: async () => {
      await post("topics", "POST", { name: name.value, partitions: Number(parts.value) }).catch(showError);
      route();
    },
  }, "Create topic"));
}

async function topicPage(main, name) {
  name = decodeURIComponent(name);
  const d = await api("topics/" + encodeURIComponent(name));
  const t = d.topic;
  main.append(el("h1", {}, "Topic ", el("span", { id: "topic-name" }, t.name)));
  main.append(el("div", { class: "cards" },
    card("Partitions", t.partitions.length), card("Records", d.records.toLocaleString("en-US")), card("Size", bytes(d.size_bytes)),
    card("Retention", d.configs_hidden ? hiddenCell() : retention(t.configs.find((c) => c.name === "retention.ms")?.value)), card("Topic id", t.id)));
  if (cluster && cluster.admin && d.can_delete) {
    main.append(el("div", { class: "toolbar" }, el("button", {
      class: "danger", onclick: async () => {
        if (!confirm("Delete topic " + t.name + " and all its records?")) return;
        await post("topics/" + encodeURIComponent(t.name), "DELETE").then(() => { location.hash = "#/topics"; }).catch(showError);
      },
    }, "Delete topic")));
  }
  const parts = el("div", { id: "partitions" });
  const fillParts = (ps) => parts.replaceChildren(table(["#Partition", "#Start offset", "#End offset", "#Records", "#Size", "#Segments", "#Records in", "#Records out", "Status"],
    ps.map((p) => row(num(p.partition), num(p.start_offset), num(p.high_watermark), num(p.high_watermark - p.start_offset), num(bytes(p.size_bytes)),
      num(p.segments), num(p.traffic.records_in), num(p.traffic.records_out), p.error ? el("span", { class: "err" }, p.error) : "ok"))));
  fillParts(t.partitions);
  const grid = el("div", { class: "charts" });
  main.append(el("h2", {}, "Partitions"), parts, el("h2", {}, "Throughput"), grid);
  const pre = "topic/" + t.name + "/";
  const recs = chart(grid, "Records per second", [{ name: pre + "in.records", label: "produced" }, { name: pre + "out.records", label: "fetched" }]);
  const byts = chart(grid, "Bytes per second", [{ name: pre + "in.bytes", label: "produced" }, { name: pre + "out.bytes", label: "fetched" }], "bytes");
  const draw = async () => { const h = await history({ prefix: pre }); recs(h); byts(h); };
  await draw();
  main.append(el("h2", {}, "Messages"), browser(t));
  if (d.configs_hidden) main.append(el("h2", {}, "Configuration"), el("p", { class: "muted", id: "configs" }, "Your user may not see this topic's configuration (it needs DESCRIBE_CONFIGS on the topic)."));
  else main.append(el("h2", {}, "Configuration"), table(["Name", "Value", "Source"],
    t.configs.map((c) => row(c.name, c.value, c.source === "DEFAULT_CONFIG" ? el("span", { class: "muted" }, "default") : "set on topic")), { id: "configs" }));
  every(refreshMs(), async () => {
    draw();
    fillParts((await api("topics/" + encodeURIComponent(t.name) + "/partitions")).partitions);
  });
}

// browser is the message browser of a topic: a bounded page of records
// of one partition, from the end, an offset or a timestamp.
function browser(t) {
  const part = el("select", { id: "mb-partition", "aria-label": "Partition" }, t.partitions.map((p) => el("option", { value: p.partition }, "partition " + p.partition)));
  const mode = el("select", { id: "mb-mode", "aria-label": "Start" },
    el("option", { value: "latest" }, "latest"), el("option", { value: "offset" }, "from offset"), el("option", { value: "timestamp" }, "from time"));
  const at = el("input", { id: "mb-at", placeholder: "offset or 2026-01-02T15:04:05", size: 22 });
  const limit = el("select", { id: "mb-limit", "aria-label": "Records per page" }, [10, 20, 50, 100, 200].map((n) => el("option", { value: n, selected: n === 20 }, n + " per page")));
  const format = el("select", { id: "mb-format", "aria-label": "Show values as" },
    el("option", { value: "text" }, "text"), el("option", { value: "json" }, "JSON"), el("option", { value: "hex" }, "hex"));
  const info = el("span", { class: "muted", id: "mb-info" });
  const out = el("div", { id: "mb-records" });
  let page = null;
  const load = async (params) => {
    const q = new URLSearchParams({ limit: limit.value, ...params });
    page = await api("topics/" + encodeURIComponent(t.name) + "/partitions/" + part.value + "/records?" + q);
    render();
  };
  const go = () => {
    if (mode.value === "offset") return load({ offset: at.value || "0" });
    if (mode.value === "timestamp") {
      const ms = /^\d+$/.test(at.value) ? Number(at.value) : Date.parse(at.value);
      if (Number.isNaN(ms)) return Promise.reject(new Error("not a time: " + at.value));
      return load({ timestamp: ms });
    }
    return load({});
  };
  const render = () => {
    const n = page.records.length;
    info.textContent = n ? "offsets " + page.records[0].offset + "–" + page.records[n - 1].offset + " of [" + page.start_offset + ", " + page.high_watermark + ")" : "no records from offset " + page.from + " (log holds [" + page.start_offset + ", " + page.high_watermark + "))";
    out.replaceChildren(table(["#Offset", "Timestamp", "Key", "Value", "Headers"], page.records.map((r) => el("tr", { "data-offset": r.offset },
      num(r.offset), new Date(r.timestamp).toISOString(), el("td", {}, showDecoded(r.key_decoded, format.value) || show(r.key, r.key_size, format.value)),
      el("td", {}, showDecoded(r.value_decoded, format.value) || show(r.value, r.value_size, format.value)),
      el("td", {}, r.headers.map((h) => el("span", { class: "tag" }, h.key + "=" + text(b64(h.value))))))), { id: "mb-table" }));
  };
  const prev = el("button", { id: "mb-prev", onclick: () => page && load({ offset: Math.max(page.start_offset, page.from - Number(limit.value)) }).catch(showError) }, "◀ Older");
  const next = el("button", { id: "mb-next", onclick: () => page && load({ offset: page.next_offset }).catch(showError) }, "Newer ▶");
  format.addEventListener("change", () => page && render());
  const box = el("div", { id: "browser" },
    el("p", { class: "help" }, "Read records of one partition: the latest ones, or from an offset or a time. Pages are bounded (at most 200 records, values cut at 16 KiB)."),
    el("div", { class: "toolbar" }, part, mode, at, limit, format,
      el("button", { id: "mb-load", onclick: () => go().catch(showError) }, "Load"), prev, next, info), out);
  go().catch(showError);
  return box;
}

function b64(s) {
  if (s === null || s === undefined) return null;
  const bin = atob(s);
  const a = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
  return a;
}

function text(a) { return a === null ? "null" : new TextDecoder("utf-8", { fatal: false }).decode(a); }

function show(s, size, format) {
  const a = b64(s);
  if (a === null) return el("span", { class: "muted" }, "null");
  let body;
  if (format === "hex") {
    body = Array.from(a, (x) => x.toString(16).padStart(2, "0")).join(" ").replace(/((?:\S+ ){16})/g, "$1\n");
  } else if (format === "json") {
    try { body = JSON.stringify(JSON.parse(text(a)), null, 2); } catch (e) { body = text(a); }
  } else {
    body = text(a);
  }
  return [el("pre", { class: "val" }, body), size > a.length ? el("span", { class: "muted" }, "(first " + bytes(a.length) + " of " + bytes(size) + ")") : null];
}

// ---- schema registry (shown when the broker serves one) ----

// registry calls the schema registry's REST API through the console.
function registry(path) { return api("registry/" + path); }

// showDecoded renders a key or value decoded with its registered schema
// (null when there is none, or when hex is asked for).
function showDecoded(d, format) {
  if (!d || format === "hex") return null;
  const what = "schema " + d.schema_id + " · " + d.schema_type + (d.message ? " " + d.message : "");
  const tag = el("a", { class: "tag", href: "#/schemas", title: "decoded with the registered schema" }, what);
  if (d.error) return [tag, el("span", { class: "err" }, " " + d.error)];
  const body = format === "json" ? JSON.stringify(d.json, null, 2) : JSON.stringify(d.json);
  return [tag, el("pre", { class: "val decoded" }, body)];
}

async function schemasPage(main) {
  const holder = el("div", { id: "subjects-table" });
  main.append(el("h1", {}, "Schemas"),
    el("p", { class: "help" }, "The schema registry's subjects (a subject is usually a topic's key or value), their latest version and compatibility level. Records written with a registered schema are decoded in the message browser."),
    holder);
  const global = await registry("config").catch(() => null);
  const subjects = (await registry("subjects")).slice(0, 200);
  const rows = await Promise.all(subjects.map(async (s) => {
    const v = await registry("subjects/" + encodeURIComponent(s) + "/versions/latest");
    const c = await registry("config/" + encodeURIComponent(s) + "?defaultToGlobal=true").catch(() => null);
    return row(el("a", { href: "#/schemas/" + encodeURIComponent(s) }, s), v.schemaType || "AVRO", num(v.version), num(v.id),
      c ? c.compatibilityLevel : "–");
  }));
  fill(holder, global ? el("p", { class: "muted", id: "global-compat" }, "Global compatibility level: " + global.compatibilityLevel) : null,
    table(["Subject", "Type", "#Latest version", "#Schema id", "Compatibility"], rows));
}

async function subjectPage(main, name) {
  name = decodeURIComponent(name);
  const subj = encodeURIComponent(name);
  const versions = await registry("subjects/" + subj + "/versions");
  const c = await registry("config/" + subj + "?defaultToGlobal=true").catch(() => null);
  const pick = el("select", { id: "schema-version", "aria-label": "Version" },
    versions.map((v) => el("option", { value: v, selected: v === versions[versions.length - 1] }, "version " + v)));
  const cards = el("div", { class: "cards", id: "schema-cards" });
  const text = el("pre", { class: "val", id: "schema-text" });
  const refs = el("div", { id: "schema-refs" });
  main.append(el("h1", {}, "Subject ", el("span", { id: "subject-name" }, name)),
    el("div", { class: "toolbar" }, pick), cards, el("h2", {}, "Schema"), text, refs);
  const load = async () => {
    const v = await registry("subjects/" + subj + "/versions/" + pick.value);
    const type = v.schemaType || "AVRO";
    cards.replaceChildren(card("Version", v.version), card("Schema id", v.id), card("Type", type),
      card("Versions", versions.length), card("Compatibility", c ? c.compatibilityLevel : "–"));
    let body = v.schema;
    if (type !== "PROTOBUF") { try { body = JSON.stringify(JSON.parse(v.schema), null, 2); } catch (e) { body = v.schema; } }
    text.textContent = body;
    fill(refs, (v.references || []).length ? [el("h2", {}, "References"), table(["Name", "Subject", "#Version"],
      v.references.map((r) => row(r.name, el("a", { href: "#/schemas/" + encodeURIComponent(r.subject) }, r.subject), num(r.version))))] : null);
  };
  pick.addEventListener("change", () => load().catch(showError));
  await load();
}

async function groupsPage(main) {
  const holder = el("div", { id: "groups-table" });
  main.append(el("h1", {}, "Consumer groups"),
    el("p", { class: "help" }, "Consumers that share a group id split a topic's partitions between them (classic and consumer groups); the members of a share group read the same partitions together and acknowledge each record. Lag is how many records they have yet to read (in a share group: to accept or archive)."),
    holder);
  const load = async () => {
    const d = await api("groups");
    fill(holder, table(["Group", "Type", "State", "Protocol", "#Epoch", "#Members", "#Topics", "#Lag"],
      d.groups.map((g) => row(el("a", { href: "#/groups/" + encodeURIComponent(g.id) }, g.id), g.type || "–", g.state, g.protocol || g.protocol_type || "–",
        num(g.epoch), num(g.members), num(g.topics), el("td", { class: "num" + (g.lag > 0 ? " lag-high" : "") }, g.lag.toLocaleString("en-US"))))),
    d.share_groups_error ? el("p", { class: "err" }, d.share_groups_error) : null);
  };
  await load();
  every(refreshMs(), load);
}

async function groupPage(main, id) {
  id = decodeURIComponent(id);
  const first = await api("groups/" + encodeURIComponent(id));
  if (first.group.type === "share") return shareGroupPage(main, id, first);
  const cards = el("div", { class: "cards", id: "group-cards" });
  const members = el("div", { id: "members" });
  const offsets = el("div", { id: "offsets" });
  const grid = el("div", { class: "charts" });
  main.append(el("h1", {}, "Group ", el("span", { id: "group-id" }, id)), cards,
    el("h2", {}, "Members"), members, el("h2", {}, "Committed offsets and lag"), offsets, el("h2", {}, "Lag"), grid);
  if (cluster && cluster.admin) main.append(el("h2", {}, "Reset offsets"), resetForm(id));
  const lag = chart(grid, "Total lag (records)", [{ name: "group/" + id + "/lag", label: "lag" }]);
  const render = (d) => {
    const g = d.group;
    const consumer = g.type === "consumer"; // KIP-848: the broker assigns, members have epochs
    cards.replaceChildren(card("Type", g.type || "–"), card("State", g.state), card("Protocol", (g.protocol_type || "–") + (g.protocol ? " / " + g.protocol : "")),
      consumer ? card("Group epoch / assignment epoch", g.epoch + " / " + g.assignment_epoch) : card("Generation", g.epoch),
      card("Members", g.members), card("Total lag", g.lag.toLocaleString("en-US")));
    fill(members, table(["Member", "Client id", "Host", consumer ? "#Member epoch" : null, "Assigned partitions"].filter(Boolean), d.members.map((m) => row(...[m.member_id, m.client_id, m.client_host,
      consumer ? num(m.member_epoch) : null, assignedTags(m.assigned)].filter((c) => c !== null))), { id: "members-table" }),
    d.members_error ? el("p", { class: "err" }, d.members_error) : null);
    offsets.replaceChildren(table(["Topic", "#Partition", "#Committed", "#End offset", "#Lag"], g.offsets.map((o) => row(
      el("a", { href: "#/topics/" + encodeURIComponent(o.topic) }, o.topic), num(o.partition), num(o.committed),
      num(o.high_watermark < 0 ? "deleted" : o.high_watermark), el("td", { class: "num" + (o.lag > 0 ? " lag-high" : "") }, o.lag.toLocaleString("en-US")))), { id: "offsets-table" }));
  };
  const load = async () => {
    render(await api("groups/" + encodeURIComponent(id)));
    lag(await history({ series: "group/" + id + "/lag" }));
  };
  render(first);
  lag(await history({ series: "group/" + id + "/lag" }));
  every(refreshMs(), load);
}

function assignedTags(assigned) {
  return Object.entries(assigned).map(([t, ps]) => el("span", { class: "tag" }, t + ": " + ps.join(",")));
}

// shareGroupPage shows a share group (KIP-932): its members and, per
// share partition, the start offset (below it every record is accepted
// or archived), the end offset, the lag and the records in flight by
// state.
async function shareGroupPage(main, id, first) {
  const cards = el("div", { class: "cards", id: "group-cards" });
  const members = el("div", { id: "members" });
  const parts = el("div", { id: "share-partitions" });
  const records = el("div", { id: "share-records" });
  main.append(el("h1", {}, "Share group ", el("span", { id: "group-id" }, id)),
    el("p", { class: "help" }, "The members of a share group read the same partitions together: each record is acquired by one member at a time, under a lock, and accepted, released (delivered again) or rejected (archived). Lag is the records not yet accepted or archived."),
    cards, el("h2", {}, "Members"), members, el("h2", {}, "Share partitions"), parts, el("h2", {}, "Records in flight"), records);
  const render = (d) => {
    const g = d.group;
    cards.replaceChildren(card("Type", g.type), card("State", g.state), card("Assignor", g.protocol || "–"),
      card("Group epoch / assignment epoch", g.epoch + " / " + g.assignment_epoch), card("Members", g.members), card("Total lag", g.lag.toLocaleString("en-US")));
    fill(members, table(["Member", "Client id", "Host", "#Member epoch", "Assigned partitions"], d.members.map((m) => row(m.member_id, m.client_id, m.client_host,
      num(m.member_epoch), assignedTags(m.assigned))), { id: "members-table" }));
    parts.replaceChildren(table(["Topic", "#Partition", "#Start offset", "#End offset", "#Lag", "Status"], g.partitions.map((p) => row(
      el("a", { href: "#/topics/" + encodeURIComponent(p.topic) }, p.topic), num(p.partition), num(p.start_offset < 0 ? "–" : p.start_offset),
      num(p.end_offset < 0 ? "deleted" : p.end_offset), el("td", { class: "num" + (p.lag > 0 ? " lag-high" : "") }, p.lag < 0 ? "–" : p.lag.toLocaleString("en-US")),
      p.error ? el("span", { class: "err" }, p.error) : "ok")), { id: "share-partitions-table" }));
    records.replaceChildren(table(["Topic", "#Partition", "#Acquired", "#Available", "#Acknowledged", "#Archived"], g.partitions.map((p) => row(
      p.topic, num(p.partition), num(p.records.acquired), num(p.records.available), num(p.records.acknowledged), num(p.records.archived))), { id: "share-records-table" }),
    el("p", { class: "muted" }, "Between each share partition's start offset and the next offset never acquired. Acquired: delivered to a member, locked until it acknowledges or the lock expires. " +
      "Available: released, or their lock expired: the next fetch can acquire them. Acknowledged: accepted, above records still in flight. Archived: rejected or past the delivery limit: never delivered again."));
  };
  render(first);
  every(refreshMs(), async () => render(await api("groups/" + encodeURIComponent(id))));
}

function resetForm(id) {
  const topic = el("input", { placeholder: "topic" });
  const to = el("select", {}, el("option", { value: "earliest" }, "earliest"), el("option", { value: "latest" }, "latest"), el("option", { value: "offset" }, "offset"));
  const off = el("input", { type: "number", placeholder: "offset", min: 0 });
  return el("div", { class: "toolbar" }, topic, to, off, el("button", {
    onclick: async () => {
      await post("groups/" + encodeURIComponent(id) + "/reset", "POST", { topic: topic.value, to: to.value, offset: Number(off.value || 0) }).catch(showError);
      route();
    },
  }, "Reset (group must have no members)"));
}

// ---- shell ----

function navigate() {
  const hash = location.hash || "#/";
  const nav = document.getElementById("nav");
  const features = (cluster && cluster.features) || [];
  nav.replaceChildren(...pages.filter((p) => features.includes(p.feature)).map((p) => {
    const active = p.href === "#/" ? hash === "#/" || hash === "" : hash.startsWith(p.href);
    return el("a", { href: p.href, class: active ? "active" : null }, p.title);
  }));
  const s = document.getElementById("status");
  if (cluster) {
    s.textContent = (cluster.ready ? "ready" : "not ready") + (cluster.user ? " · " + cluster.user : "");
    s.className = "status " + (cluster.ready ? "ok" : "bad");
  }
}

async function route() {
  for (const t of timers) clearInterval(t);
  for (const c of charts) c.destroy();
  timers = []; charts = [];
  const main = document.getElementById("main");
  main.replaceChildren();
  delete main.dataset.loaded;
  try {
    cluster = await api("cluster");
  } catch (e) {
    showError(e);
  }
  navigate();
  const hash = location.hash || "#/";
  for (const [re, page] of routes) {
    const m = hash.match(re);
    if (m) {
      try {
        await page(main, ...m.slice(1));
        main.dataset.loaded = hash;
      } catch (e) {
        main.append(el("p", { class: "err", id: "page-error" }, String(e.message || e)));
      }
      return;
    }
  }
  main.append(el("p", { class: "err" }, "No page at " + hash));
}

window.addEventListener("resize", () => {
  for (const c of charts) c.setSize({ width: Math.max(300, c.root.parentElement.clientWidth - 16), height: 200 });
});
window.addEventListener("hashchange", route);
route();
