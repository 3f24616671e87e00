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

  let me = null;        // this browser's annotator (its session's name)
  let shownURL = null;  // the object URL of the image on screen

  async function showImage(item) {
    try {
      const url = await AB.blobURL(item.image);
      if (current !== item) { URL.revokeObjectURL(url); return; }  // the page moved on meanwhile
      if (shownURL) URL.revokeObjectURL(shownURL);
      shownURL = url;
      image.src = url;
    } catch (error) { say(error.message, true); }
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
    showImage(item);
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
        try { const data = await AB.call("POST", "/api/next", {}); show(data.item, data.message); } catch (e) { say(e.message, true); }
      }
    } finally {
      busy = false;
    }
  }

  function answer(index) {
    if (!current || index >= classes.length) return;
    const button = classesBox.children[index];
    if (button) { button.classList.add("pressed"); setTimeout(() => button.classList.remove("pressed"), 150); }
    request("/api/answer", { item: current.id, label: classes[index] }, (data) => {
      mine += 1;
      document.getElementById("stat-mine").textContent = mine;
      say("saved: " + data.saved.label);
    });
  }

  function skip() {
    if (!current) return;
    request("/api/skip", { item: current.id }, () => say("skipped"));
  }

  function undo() {
    request("/api/undo", {}, (data) => {
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

  nameInput.addEventListener("change", async () => {
    const wanted = nameInput.value.trim();
    if (!wanted) { nameInput.value = me; return; }
    try { me = await AB.session(wanted); } catch (error) { say(error.message, true); nameInput.value = me; return; }
    nameInput.value = me;
    refresh();
    const data = await AB.call("POST", "/api/next", {});
    show(data.item, data.message);
  });

  async function refresh() {
    try {
      const state = await AB.call("GET", "/api/state");
      document.getElementById("project").textContent = state.source;
      document.getElementById("stat-labelled").textContent = state.counts.labelled + " of " + state.counts.items;
      document.getElementById("stat-rounds").textContent = state.rounds;
      if (state.you) { mine = state.you.labelled; document.getElementById("stat-mine").textContent = mine; }
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
    try { me = await AB.session(); } catch (error) { say(error.message, true); return; }
    nameInput.value = me;
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
    const data = await AB.call("POST", "/api/next", {});
    show(data.item, data.message);
    document.body.dataset.ready = "1";
    setInterval(refresh, 3000);
  }

  start();
})();
