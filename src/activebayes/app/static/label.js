// The labelling page: one item at a time, one key per class, skip, undo.
"use strict";

(function () {
  const image = document.getElementById("item-image");
  const empty = document.getElementById("empty");
  const classesBox = document.getElementById("classes");
  const toast = document.getElementById("toast");
  const nameInput = document.getElementById("annotator");
  let classes = [];
  let current = null;   // the item shown
  let busy = false;     // a request is in flight
  let mine = 0;

  function annotator() {
    const name = (localStorage.getItem("activebayes-name") || "").trim();
    if (name) return name;
    let id = sessionStorage.getItem("activebayes-anon");
    if (!id) {
      const bytes = new Uint8Array(4);
      crypto.getRandomValues(bytes);
      id = "anon-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
      sessionStorage.setItem("activebayes-anon", id);
    }
    return id;
  }

  function say(text, isError) {
    toast.textContent = text;
    toast.classList.toggle("error", !!isError);
  }

  function show(item, message) {
    current = item;
    document.body.dataset.item = item ? String(item.id) : "";
    if (!item) {
      image.hidden = true;
      empty.hidden = false;
      empty.textContent = message || "nothing to label";
      document.getElementById("probs").replaceChildren();
      document.getElementById("why").textContent = "";
      document.getElementById("item-key").textContent = "";
      return;
    }
    image.hidden = false;
    empty.hidden = true;
    image.classList.add("busy");
    image.src = item.image;
    document.getElementById("item-key").textContent = item.key;
    document.getElementById("why").textContent = item.why;
    const probs = document.getElementById("probs");
    if (item.probs) {
      const top = Math.max.apply(null, item.probs.map((p) => p.p));
      AB.bars(probs, item.probs.map((p) => ({ name: p.class, value: p.p, label: AB.percent(p.p), top: p.p === top })));
    } else {
      probs.replaceChildren(AB.el("p", { class: "muted small", text: "no model yet: the first labels are picked at random" }));
    }
  }

  image.addEventListener("load", () => image.classList.remove("busy"));

  async function request(path, body, after) {
    if (busy) return;
    busy = true;
    try {
      const data = await AB.call("POST", path, body);
      after(data);
      show(data.item, data.message);
    } catch (error) {
      say(error.message, true);
      if (error.status === 409 || error.status === 404) {
        try { const data = await AB.call("POST", "/api/next", { annotator: annotator() }); show(data.item, data.message); } catch (e) { say(e.message, true); }
      }
    } finally {
      busy = false;
    }
  }

  function answer(index) {
    if (!current || index >= classes.length) return;
    const button = classesBox.children[index];
    if (button) { button.classList.add("pressed"); setTimeout(() => button.classList.remove("pressed"), 150); }
    request("/api/answer", { annotator: annotator(), item: current.id, label: classes[index] }, (data) => {
      mine += 1;
      document.getElementById("stat-mine").textContent = mine;
      say("saved: " + data.saved.label);
    });
  }

  function skip() {
    if (!current) return;
    request("/api/skip", { annotator: annotator(), item: current.id }, () => say("skipped"));
  }

  function undo() {
    request("/api/undo", { annotator: annotator() }, (data) => {
      if (data.undone.kind === "answer") { mine = Math.max(0, mine - 1); document.getElementById("stat-mine").textContent = mine; }
      say("took back: " + (data.undone.kind === "answer" ? data.undone.label : "skip"));
    });
  }

  document.addEventListener("keydown", (event) => {
    if (event.target === nameInput) return;
    if ((event.ctrlKey || event.metaKey) && (event.key === "z" || event.key === "Z")) { event.preventDefault(); undo(); return; }
    if (event.key === "Backspace") { event.preventDefault(); undo(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key >= "0" && event.key <= "9") {
      const index = event.key === "0" ? 9 : Number(event.key) - 1;
      event.preventDefault();
      answer(index);
    } else if (event.key === "s" || event.key === "S" || event.key === " ") {
      event.preventDefault();
      skip();
    }
  });
  document.getElementById("skip").addEventListener("click", skip);
  document.getElementById("undo").addEventListener("click", undo);

  nameInput.value = localStorage.getItem("activebayes-name") || "";
  nameInput.placeholder = annotator();
  nameInput.addEventListener("change", async () => {
    localStorage.setItem("activebayes-name", nameInput.value.trim());
    nameInput.placeholder = annotator();
    mine = 0;
    const data = await AB.call("POST", "/api/next", { annotator: annotator() });
    show(data.item, data.message);
  });

  async function refresh() {
    try {
      const state = await AB.call("GET", "/api/state");
      document.getElementById("project").textContent = state.source;
      document.getElementById("stat-labelled").textContent = state.counts.labelled + " of " + state.counts.items;
      document.getElementById("stat-rounds").textContent = state.rounds;
      const acc = state.accuracy;
      let text = acc.prequential === null ? "–" : AB.percent(acc.prequential) + " (last " + acc.prequential_n + ")";
      if (acc.test !== null && acc.test !== undefined) text += " · test " + AB.percent(acc.test);
      document.getElementById("stat-accuracy").textContent = text;
      AB.statusLine(document.getElementById("status"), state);
      return state;
    } catch (error) {
      say(error.message, true);
      return null;
    }
  }

  async function start() {
    const state = await refresh();
    if (!state) return;
    classes = state.classes;
    classes.forEach((name, index) => {
      const key = index < 9 ? String(index + 1) : index === 9 ? "0" : "";
      const button = AB.el("button", { type: "button", "data-label": name }, [
        ...(key ? [AB.el("kbd", { text: key })] : []), document.createTextNode(" " + name)]);
      button.addEventListener("click", () => answer(index));
      classesBox.appendChild(button);
    });
    const data = await AB.call("POST", "/api/next", { annotator: annotator() });
    show(data.item, data.message);
    document.body.dataset.ready = "1";
    setInterval(refresh, 3000);
  }

  start();
})();
