// The site's core: data loading (each data file is a <script> that calls MS.put, since browsers
// refuse fetch() from file://), elements built from text nodes only (no data ever reaches innerHTML),
// number formats and the hash router. Pages register themselves in MS.routes.
"use strict";

window.MS = window.MS || {};
MS.data = MS.data || {};
MS.routes = [];
MS.loading = {};

MS.put = function (key, value) { MS.data[key] = value; };

// Load data/<key>.js once; resolves when its MS.put has run.
MS.need = function (key) {
  if (MS.data[key]) return Promise.resolve(MS.data[key]);
  if (!MS.loading[key]) {
    MS.loading[key] = new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = "data/" + key + ".js";
      s.charset = "utf-8";
      s.onload = function () { MS.data[key] ? resolve(MS.data[key]) : reject(new Error(key + " holds no data")); };
      s.onerror = function () { reject(new Error("cannot load data/" + key + ".js")); };
      document.head.appendChild(s);
    });
  }
  return MS.loading[key];
};
MS.run = function (i) { return MS.need("run-" + i); };

// h("a", {href: "#/"}, "text", child, [more]): strings become text nodes, so any text from the data
// (a model's answer included) is shown as text and never parsed as HTML.
function h(tag, props) {
  var el = document.createElement(tag);
  Object.keys(props || {}).forEach(function (k) {
    var v = props[k];
    if (v === null || v === undefined || v === false) return;
    if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v);
  });
  (function add(items) {
    items.forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      if (Array.isArray(c)) add(c);
      else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    });
  })(Array.prototype.slice.call(arguments, 2));
  return el;
}
MS.h = h;

MS.route = function () { return Array.prototype.map.call(arguments, function (p) { return encodeURIComponent(p); }).join("/"); };
MS.link = function (text, route, props) { return h("a", Object.assign({href: "#/" + route}, props || {}), text); };

MS.num = function (x, digits) {
  if (x === null || x === undefined || typeof x !== "number" || !isFinite(x)) return "–";
  return Number.isInteger(x) ? String(x) : x.toFixed(digits === undefined ? 3 : digits);
};
MS.signed = function (x, digits) {
  var t = MS.num(x, digits);
  return (typeof x === "number" && x > 0 ? "+" : "") + t;
};
MS.ci = function (mean, lo, hi, digits) {
  if (mean === null || mean === undefined) return "–";
  var t = MS.signed(mean, digits);
  return lo === null || lo === undefined ? t : t + " [" + MS.signed(lo, digits) + ", " + MS.signed(hi, digits) + "]";
};
MS.mean = function (xs) { return xs.length ? xs.reduce(function (a, b) { return a + b; }, 0) / xs.length : null; };

MS.metricLabel = function (key) {
  var m = (MS.data.site.metrics || {})[key];
  return m ? m.label : key;
};
MS.higherIsBetter = function (key) {
  var m = (MS.data.site.metrics || {})[key];
  return !m || m.higher_is_better;
};

MS.table = function (header, rows, props) {
  return h("table", props || {}, h("thead", {}, h("tr", {}, header.map(function (c) { return h("th", {}, c); }))),
           h("tbody", {}, rows));
};
MS.pre = function (text, props) { return h("pre", Object.assign({class: "text"}, props || {}), text); };
MS.note = function (text) { return h("p", {class: "note"}, text); };
MS.excerpt = function (text, n) { text = String(text || ""); return text.length > n ? text.slice(0, n) + "…" : text; };

// "#/run/3/q/100/7?agent=pun" -> {parts: ["run", "3", "q", "100", "7"], query: {agent: "pun"}}
MS.parseHash = function () {
  var raw = location.hash.replace(/^#\/?/, ""), q = raw.indexOf("?"), query = {};
  var path = q < 0 ? raw : raw.slice(0, q);
  if (q >= 0) new URLSearchParams(raw.slice(q + 1)).forEach(function (v, k) { query[k] = v; });
  return {parts: path ? path.split("/").map(decodeURIComponent) : [], query: query};
};
// Keep a page's filters in its address without adding a history entry per keystroke.
MS.setQuery = function (query) {
  var base = location.hash.split("?")[0], params = new URLSearchParams();
  Object.keys(query).forEach(function (k) { if (query[k]) params.set(k, query[k]); });
  var s = params.toString();
  history.replaceState(null, "", base + (s ? "?" + s : ""));
};

MS.render = function () {
  var where = MS.parseHash(), main = document.getElementById("main");
  var page = MS.routes.find(function (r) { return r.match(where.parts); }) || MS.notFound;
  main.textContent = "";
  main.appendChild(h("p", {class: "note"}, "loading…"));
  Promise.resolve(page.show(where.parts, where.query)).then(function (node) {
    main.textContent = "";
    main.appendChild(node);
    document.body.setAttribute("data-page", page.name);
    // Milliseconds from the document's start until this page was drawn (the README's load times).
    document.body.setAttribute("data-drawn-ms", Math.round(performance.now()));
    window.scrollTo(0, 0);
  }).catch(function (error) {
    main.textContent = "";
    main.appendChild(h("p", {class: "error"}, "This page cannot be shown: " + error.message));
  });
};

MS.notFound = {name: "none", show: function () {
  return h("div", {}, h("h1", {}, "No such page"), MS.link("Back to the front page", ""));
}};

window.addEventListener("hashchange", MS.render);
window.addEventListener("DOMContentLoaded", MS.render);
