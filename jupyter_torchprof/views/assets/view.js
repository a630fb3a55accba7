// The front end of jupyter_torchprof's inline view (an anywidget ES module).
//
// It draws the tree of nodes the kernel sends (views/ui.py) and talks to the
// kernel with the small messages listed in views/surface.py. BokehJS is asked
// of the kernel once per page and kept on `window`; nothing is fetched from
// any network.

const BOKEH_PROMISE = "__torchprofBokehPromise";
// Set by the JupyterLab extension while it loads BokehJS for the sidebar.
const LAB_LOADING = "__torchprofBokehLoading";

function decode(buffer) {
  return new TextDecoder().decode(buffer);
}

function toArrayBuffer(view) {
  if (view instanceof ArrayBuffer) return view;
  return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
}

function hasBokeh(version) {
  const B = window.Bokeh;
  return !!(B && B.require && B.Tables && (!version || B.version === version));
}

// Resolves with the kernel's reply to `content` (the first message `match` accepts).
function ask(model, content, match) {
  return new Promise((resolve) => {
    const listener = (msg, buffers) => {
      if (msg && match(msg)) {
        model.off("msg:custom", listener);
        resolve([msg, buffers || []]);
      }
    };
    model.on("msg:custom", listener);
    model.send(content);
  });
}

function runScript(code, name) {
  const script = document.createElement("script");
  script.textContent = `${code}\n//# sourceURL=torchprof/${name}`;
  document.head.appendChild(script);
  script.remove();
}

// BokehJS on this page: the one already there (same version), or the
// installed bokeh's bundles sent by the kernel, evaluated once.
function loadBokeh(model) {
  const version = model.get("bokeh_version");
  if (hasBokeh(version)) return Promise.resolve(window.Bokeh);
  if (window[BOKEH_PROMISE]) return window[BOKEH_PROMISE];
  const loading = (async () => {
    if (window[LAB_LOADING]) {
      try {
        await window[LAB_LOADING];
      } catch (err) {
        // the kernel sends it below
      }
      if (hasBokeh(version)) return window.Bokeh;
    }
    const [msg, buffers] = await ask(model, { t: "bokehjs" }, (m) => m.t === "bokehjs");
    msg.names.forEach((name, i) => runScript(decode(buffers[i]), name));
    if (!hasBokeh()) throw new Error("the BokehJS sent by the kernel did not start");
    return window.Bokeh;
  })();
  window[BOKEH_PROMISE] = loading;
  loading.catch(() => {
    window[BOKEH_PROMISE] = undefined; // the next view may try again
  });
  return loading;
}

function eventKey(e) {
  if (e.kind === "ModelChanged") return `c:${e.model && e.model.id}:${e.attr}`;
  if (e.kind === "MessageSent") {
    const d = e.msg_data || {};
    const m = d.event_values && d.event_values.model;
    return `m:${d.event_name}:${m && m.id}`;
  }
  return `?:${Math.random()}`;
}

const BASE = {
  box: "jp-TorchProf-box",
  html: "jp-TorchProf-html",
  text: "jp-TorchProf-text",
  toggle: "jp-TorchProf-togglebar",
  select: "jp-TorchProf-select",
  button: "jp-TorchProf-btn",
  tabs: "jp-TorchProf-tabset",
  details: "jp-TorchProf-section",
  bokeh: "jp-TorchProf-figure",
};

class View {
  constructor(model, el) {
    this.model = model;
    this.els = new Map(); // node id -> element
    this.figures = new Map(); // node id -> figure state
    this.root = document.createElement("div");
    this.root.className = "jp-TorchProf-surface";
    this.root.textContent = "loading the profile view…";
    el.appendChild(this.root);
    this.downloads = new Map(); // token -> pieces received
    this.root.addEventListener("click", (e) => this.maybeDownload(e));
    this.listener = (msg, buffers) => this.message(msg, buffers || []);
    model.on("msg:custom", this.listener);
    model.send({ t: "hello" });
  }

  message(msg, buffers) {
    if (!msg || this.retired) return;
    if (msg.t === "tree") {
      // Another copy of the view asked too: rebuild in place, never detach what is drawn.
      const top = this.build(msg.tree);
      if (this.root.firstChild !== top || this.root.childNodes.length !== 1) this.root.replaceChildren(top);
    } else if (msg.t === "node") {
      const old = this.els.get(msg.node.id);
      if (old) {
        const fresh = this.build(msg.node);
        if (fresh !== old) old.replaceWith(fresh);
      }
    } else if (msg.t === "doc") {
      this.gotDocument(msg, buffers);
    } else if (msg.t === "patch") {
      this.patch(msg, buffers);
    } else if (msg.t === "ack") {
      const fig = this.figures.get(msg.id);
      if (fig) {
        fig.busy = false;
        this.pump(fig);
      }
    } else if (msg.t === "retire") {
      this.retire(msg.html);
    } else if (msg.t === "file") {
      this.filePiece(msg, buffers[0]);
    }
  }

  // ---- downloads (export links): the kernel sends the file, the page saves it

  maybeDownload(event) {
    const link = event.target.closest && event.target.closest("a[data-download]");
    if (!link || !this.root.contains(link)) return;
    event.preventDefault();
    const token = link.dataset.download;
    if (this.downloads.has(token)) return;
    this.downloads.set(token, { pieces: [], link });
    link.dataset.state = "downloading";
    this.send({ t: "download", token });
  }

  filePiece(msg, buffer) {
    const d = this.downloads.get(msg.token);
    if (!d) return; // another copy of the view asked
    if (msg.error) {
      this.downloads.delete(msg.token);
      d.link.dataset.state = "failed";
      d.link.textContent = `download failed: ${msg.error}`;
      return;
    }
    d.pieces[msg.seq] = buffer ? toArrayBuffer(buffer) : new ArrayBuffer(0);
    if (!msg.last) return;
    this.downloads.delete(msg.token);
    const url = URL.createObjectURL(new Blob(d.pieces));
    const a = document.createElement("a");
    a.href = url;
    a.download = msg.name;
    a.style.display = "none";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    d.link.dataset.state = "done";
  }

  send(content) {
    this.model.send(content);
  }

  // ---- nodes ---------------------------------------------------------------

  build(n) {
    let el = this.els.get(n.id);
    if (!el || el.__kind !== n.kind) {
      el = this.create(n);
      el.__kind = n.kind;
      this.els.set(n.id, el);
    }
    this.update(el, n);
    const classes = [BASE[n.kind] || "jp-TorchProf-node", ...(n.cls || [])];
    if (n.kind === "box") classes.push(n.row ? "jp-TorchProf-row" : "jp-TorchProf-column");
    el.className = classes.join(" ");
    el.style.display = n.hidden ? "none" : "";
    if (n.width) el.style.width = n.width;
    el.dataset.node = n.id;
    return el;
  }

  setChildren(el, kids) {
    const now = Array.from(el.children);
    if (now.length === kids.length && now.every((c, i) => c === kids[i])) return;
    el.replaceChildren(...kids);
  }

  create(n) {
    const id = n.id;
    if (n.kind === "text") {
      const box = document.createElement("div");
      const input = document.createElement("input");
      input.type = "text";
      input.spellcheck = false;
      let timer = null;
      input.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(() => this.send({ t: "set", id, value: input.value }), 120);
      });
      box.appendChild(input);
      return box;
    }
    if (n.kind === "select") {
      const box = document.createElement("label");
      box.appendChild(document.createElement("span"));
      const select = document.createElement("select");
      select.addEventListener("change", () => this.send({ t: "set", id, value: select.selectedIndex }));
      box.appendChild(select);
      return box;
    }
    if (n.kind === "button") {
      const b = document.createElement("button");
      b.type = "button";
      b.addEventListener("click", () => this.send({ t: "click", id }));
      return b;
    }
    if (n.kind === "tabs") {
      const box = document.createElement("div");
      const bar = document.createElement("div");
      bar.className = "jp-TorchProf-tabbar";
      bar.setAttribute("role", "tablist");
      const pages = document.createElement("div");
      pages.className = "jp-TorchProf-tabpages";
      box.append(bar, pages);
      return box;
    }
    if (n.kind === "details") {
      const d = document.createElement("details");
      d.appendChild(document.createElement("summary"));
      return d;
    }
    if (n.kind === "bokeh") {
      const el = document.createElement("div");
      el.textContent = "loading the figure…";
      this.wantFigure(id, el);
      return el;
    }
    return document.createElement("div");
  }

  update(el, n) {
    const kids = (n.children || []).map((c) => this.build(c));
    if (n.kind === "box") {
      this.setChildren(el, kids);
    } else if (n.kind === "html") {
      if (el.__html !== n.html) {
        el.innerHTML = n.html;
        el.__html = n.html;
      }
    } else if (n.kind === "text") {
      const input = el.firstChild;
      input.placeholder = n.placeholder || "";
      if (input.value !== n.value && document.activeElement !== input) input.value = n.value;
    } else if (n.kind === "toggle") {
      this.updateToggle(el, n);
    } else if (n.kind === "select") {
      this.updateSelect(el, n);
    } else if (n.kind === "button") {
      el.textContent = n.label;
      el.title = n.tip || "";
    } else if (n.kind === "tabs") {
      this.updateTabs(el, n, kids);
    } else if (n.kind === "details") {
      el.firstChild.textContent = n.title;
      this.setChildren(el, [el.firstChild, ...kids]);
    }
  }

  updateToggle(el, n) {
    if (el.__labels !== JSON.stringify(n.labels)) {
      el.__labels = JSON.stringify(n.labels);
      el.replaceChildren(
        ...n.labels.map((label, i) => {
          const b = document.createElement("button");
          b.type = "button";
          b.className = "jp-TorchProf-togglebutton";
          b.textContent = label;
          b.title = (n.tips || [])[i] || "";
          b.addEventListener("click", () => {
            this.pressToggle(el, i);
            this.send({ t: "set", id: n.id, value: i });
          });
          return b;
        }),
      );
    }
    this.pressToggle(el, n.index);
  }

  pressToggle(el, index) {
    Array.from(el.children).forEach((b, i) => {
      b.classList.toggle("jp-mod-active", i === index);
      b.setAttribute("aria-pressed", String(i === index));
    });
  }

  updateSelect(el, n) {
    el.firstChild.textContent = n.description ? `${n.description} ` : "";
    const select = el.lastChild;
    if (select.__labels !== JSON.stringify(n.labels)) {
      select.__labels = JSON.stringify(n.labels);
      select.replaceChildren(
        ...n.labels.map((label) => {
          const o = document.createElement("option");
          o.textContent = label;
          return o;
        }),
      );
    }
    select.selectedIndex = n.index;
  }

  updateTabs(el, n, pages) {
    const [bar, holder] = el.children;
    if (bar.__titles !== JSON.stringify(n.titles)) {
      bar.__titles = JSON.stringify(n.titles);
      bar.replaceChildren(
        ...n.titles.map((title, i) => {
          const b = document.createElement("button");
          b.type = "button";
          b.className = "jp-TorchProf-tab";
          b.setAttribute("role", "tab");
          b.textContent = title;
          b.addEventListener("click", () => {
            this.showTab(el, i);
            this.send({ t: "set", id: n.id, value: i });
          });
          return b;
        }),
      );
    }
    this.setChildren(holder, pages);
    this.showTab(el, n.index);
  }

  showTab(el, index) {
    const [bar, holder] = el.children;
    Array.from(bar.children).forEach((b, i) => {
      b.classList.toggle("jp-mod-current", i === index);
      b.setAttribute("aria-selected", String(i === index));
    });
    Array.from(holder.children).forEach((p, i) => {
      p.classList.toggle("jp-TorchProf-hiddenpage", i !== index);
    });
  }

  // ---- bokeh figures --------------------------------------------------------

  wantFigure(id, el) {
    const fig = { id, el, state: "waiting", doc: null, queue: [], busy: false, blocked: false };
    this.figures.set(id, fig);
    if (typeof IntersectionObserver === "undefined") {
      this.fetchFigure(fig);
      return;
    }
    // Drawn when first shown: pages nobody opens cost neither bytes nor time.
    fig.io = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting)) {
          fig.io.disconnect();
          this.fetchFigure(fig);
        }
      },
      { rootMargin: "300px" },
    );
    fig.io.observe(el);
  }

  async fetchFigure(fig) {
    if (fig.state !== "waiting") return;
    fig.state = "requested";
    try {
      await loadBokeh(this.model);
    } catch (err) {
      fig.state = "failed";
      fig.el.textContent = `This figure needs BokehJS, which could not be started: ${err}`;
      console.warn("jupyter_torchprof:", err);
      return;
    }
    this.send({ t: "doc", id: fig.id });
  }

  gotDocument(msg, buffers) {
    const fig = this.figures.get(msg.id);
    if (!fig || fig.state !== "requested" || !buffers.length) return;
    const B = window.Bokeh;
    const { Document } = B.require("document");
    const { add_document_standalone } = B.require("embed/standalone");
    const arrays = new Map();
    (msg.buffers || []).forEach((bid, i) => arrays.set(bid, toArrayBuffer(buffers[i + 1])));
    const doc = Document.from_json(JSON.parse(decode(buffers[0])), undefined, arrays);
    fig.doc = doc; // patches that arrive while it is drawn apply to it
    fig.state = "shown";
    doc.on_change((event) => this.documentEvent(fig, event));
    // A table laid out in a detached or zero-width element keeps its cells at
    // one place (SlickGrid sizes its columns once): draw once the host shows it.
    const draw = () => {
      if (this.retired || this.figures.get(fig.id) !== fig) return; // closed meanwhile
      if (!fig.el.isConnected || fig.el.offsetWidth === 0) {
        requestAnimationFrame(draw);
        return;
      }
      fig.el.textContent = "";
      this.drawFigure(fig, doc, add_document_standalone);
    };
    draw();
  }

  drawFigure(fig, doc, add_document_standalone) {
    Promise.resolve(add_document_standalone(doc, fig.el)).then(
      (views) => {
        fig.views = views;
      },
      (err) => {
        fig.el.textContent = `The figure could not be drawn: ${err}`;
      },
    );
  }

  documentEvent(fig, event) {
    if (fig.blocked) return;
    const { Serializer } = window.Bokeh.require("core/serialization");
    const rep = new Serializer().encode(event);
    if (rep.kind === "ModelChanged" && rep.attr === "data") return; // echoes of our own data
    const key = eventKey(rep);
    fig.queue = fig.queue.filter((e) => eventKey(e) !== key);
    fig.queue.push(rep);
    this.pump(fig);
  }

  // One batch of events in flight per figure: a pan sends hundreds of range
  // changes, and only the last of each kind matters once the kernel is free.
  pump(fig) {
    if (fig.busy || fig.queue.length === 0) return;
    fig.busy = true;
    const events = fig.queue;
    fig.queue = [];
    this.send({ t: "ev", id: fig.id, events });
  }

  patch(msg, buffers) {
    const fig = this.figures.get(msg.id);
    if (!fig || !fig.doc) return;
    const content = JSON.parse(msg.content);
    const map = new Map();
    (msg.buffers || []).forEach((bid, i) => map.set(bid, toArrayBuffer(buffers[i])));
    fig.blocked = true;
    try {
      fig.doc.apply_json_patch(content, map);
    } finally {
      fig.blocked = false;
    }
  }

  // ---- the end ---------------------------------------------------------------

  retire(html) {
    this.dispose();
    this.retired = true;
    this.root.innerHTML = html || "";
  }

  dispose() {
    this.model.off("msg:custom", this.listener);
    for (const fig of this.figures.values()) {
      if (fig.io) fig.io.disconnect();
      try {
        if (fig.views && typeof fig.views.remove === "function") fig.views.remove();
      } catch (err) {
        // a view BokehJS already removed
      }
    }
    this.figures.clear();
  }
}

function render({ model, el }) {
  const view = new View(model, el);
  return () => view.dispose();
}

export default { render };
