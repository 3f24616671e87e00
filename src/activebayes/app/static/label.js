// The labelling page: one item at a time (an image, a text or a table row), one key per
// class, skip, undo. A multi-label project's keys toggle classes and Enter stores the set.
// Item text is only ever set as textContent, never parsed as HTML.
"use strict";

// The key of each class: a class whose name is a single character is typed by that
// character (with classes 0,...,9 the key 3 stores "3"); the other classes take the digits
// 1..9, 0, then the letters a..z (never "s", the skip key), that no class name took in
// either case. Every button shows its key; beyond 35 classes the rest are clicked.
const SPARE_KEYS = [..."1234567890", ..."abcdefghijklmnopqrtuvwxyz"];
function classKeys(names) {
  const own = names.map((name) => (name.length === 1 && name.trim() !== "" ? name : null));
  const taken = new Set(own.filter((key) => key !== null).map((key) => key.toLowerCase()));
  const spare = SPARE_KEYS.filter((key) => !taken.has(key));
  return own.map((key) => (key !== null ? key : spare.shift() || ""));
}

// The class index a key press means (-1 for none); a letter matches in either case
// when only one class has it.
function classOfKey(keys, key) {
  const exact = keys.indexOf(key);
  if (exact >= 0 || key.length !== 1) return exact;
  const folded = keys.map((k, i) => (k.toLowerCase() === key.toLowerCase() ? i : -1)).filter((i) => i >= 0);
  return folded.length === 1 ? folded[0] : -1;
}

(function () {
  const image = document.getElementById("item-image");
  const textBox = document.getElementById("item-text");
  const frame = document.getElementById("frame");
  const submitButton = document.getElementById("submit");
  const empty = document.getElementById("empty");
  const classesBox = document.getElementById("classes");
  const toast = document.getElementById("toast");
  const nameInput = document.getElementById("annotator");
  let classes = [];
  let keys = [];        // the key of each class (classKeys)
  let skipKeys = [" "]; // Space, and S unless a class is named s
  let flashTimer = null;
  let current = null;   // the item shown
  let busy = false;     // a request is in flight
  let mine = 0;
  let multilabel = false;
  let chosen = new Set(); // a multi-label answer being put together: the class indices toggled on

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

  // A text (in a scrolling box) and / or a row's fields as a key-value card, as text nodes.
  function showContent(content) {
    const parts = [];
    if (content.text !== undefined) parts.push(AB.el("p", { class: "text", text: content.text }));
    if (content.fields) {
      const card = AB.el("dl", { class: "fields" });
      content.fields.forEach(([column, value]) => {
        card.appendChild(AB.el("dt", { text: column }));
        card.appendChild(AB.el("dd", { text: value }));
      });
      parts.push(card);
    }
    textBox.replaceChildren(...parts);
    textBox.scrollTop = 0;
  }

  function showChosen() {
    Array.from(classesBox.children).forEach((button, index) => {
      const on = chosen.has(index);
      button.classList.toggle("on", on);
      button.setAttribute("aria-pressed", on ? "true" : "false");
    });
    document.body.dataset.chosen = Array.from(chosen).sort((a, b) => a - b).map((i) => classes[i]).join("|");
  }

  function show(item, message) {
    current = item;
    document.body.dataset.item = item ? String(item.id) : "";
    if (multilabel) { chosen = new Set(); showChosen(); }
    const isText = !!(item && item.kind !== "image");
    frame.classList.toggle("text-frame", isText);
    textBox.hidden = !isText;
    if (!item) {
      textBox.hidden = true;
      image.hidden = true;
      empty.hidden = false;
      empty.textContent = message || "nothing to label";
      document.getElementById("probs").replaceChildren();
      document.getElementById("why").textContent = "";
      document.getElementById("item-key").textContent = "";
      return;
    }
    empty.hidden = true;
    if (isText) {
      image.hidden = true;
      showContent(item.content);
    } else {
      image.hidden = false;
      image.classList.add("busy");
      showImage(item);
    }
    document.getElementById("item-key").textContent = item.key;
    document.getElementById("why").textContent = item.why;
    const probs = document.getElementById("probs");
    if (item.probs) {
      const top = Math.max.apply(null, item.probs.map((p) => p.p));
      AB.bars(probs, item.probs.map((p) => ({ name: p.class, value: p.p, label: AB.percent(p.p), top: p.p === top })));
    } else {
      const story = item.strategy && item.strategy !== "random"
        ? "no model yet: the first items are picked by " + item.strategy + " (from the " + (isText ? "items" : "images") + " alone)"
        : "no model yet: the first items are picked at random";
      probs.replaceChildren(AB.el("p", { class: "muted small", text: story }));
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

  // What was stored, where nobody misses it: the class in large letters over the image for a
  // moment, and a line under the buttons that stays until the next answer, with the undo key.
  function stored(label, key) {
    const flash = document.getElementById("stored-flash");
    flash.textContent = label;
    flash.hidden = false;
    flash.classList.remove("fade");
    void flash.offsetWidth; // restart the fade
    flash.classList.add("fade");
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => { flash.hidden = true; }, 1200);
    const last = document.getElementById("last");
    last.replaceChildren(document.createTextNode("stored "), AB.el("strong", { text: label }),
      document.createTextNode(" for " + key + " · "), AB.el("kbd", { text: "Backspace" }),
      document.createTextNode(" takes it back"));
    last.dataset.label = label;
  }

  function toggle(index) {
    if (!current || index < 0 || index >= classes.length) return;
    if (chosen.has(index)) chosen.delete(index); else chosen.add(index);
    showChosen();
  }

  function submitChosen() {
    if (!current) return;
    if (chosen.size === 0) { say("choose at least one class (its key toggles it), then Enter", true); return; }
    const labels = Array.from(chosen).sort((a, b) => a - b).map((i) => classes[i]);
    send({ item: current.id, labels: labels });
  }

  function answer(index) {
    if (!current || index < 0 || index >= classes.length) return;
    if (multilabel) { toggle(index); return; }
    const button = classesBox.children[index];
    if (button) { button.classList.add("pressed"); setTimeout(() => button.classList.remove("pressed"), 150); }
    send({ item: current.id, label: classes[index] });
  }

  function send(body) {
    const key = current.key;
    request("/api/answer", body, (data) => {
      showMine(data.you);
      say("saved: " + data.saved.label);
      stored(data.saved.label, key);
    });
  }

  function skip() {
    if (!current) return;
    request("/api/skip", { item: current.id }, () => say("skipped"));
  }

  function undo() {
    request("/api/undo", {}, (data) => {
      showMine(data.you);
      say("took back: " + (data.undone.kind === "answer" ? data.undone.label : "skip"));
      const last = document.getElementById("last");
      last.textContent = "took back " + (data.undone.kind === "answer" ? "\u201c" + data.undone.label + "\u201d" : "a skip");
      last.dataset.label = "";
    });
  }

  document.addEventListener("keydown", (event) => {
    if (event.target === nameInput) return;
    if ((event.ctrlKey || event.metaKey) && (event.key === "z" || event.key === "Z")) { event.preventDefault(); undo(); return; }
    if (event.key === "Backspace") { event.preventDefault(); undo(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (multilabel && event.key === "Enter") { event.preventDefault(); submitChosen(); return; }
    const index = classOfKey(keys, event.key);
    if (index >= 0) {
      event.preventDefault();
      answer(index);
    } else if (skipKeys.includes(event.key)) {
      event.preventDefault();
      skip();
    }
  });
  document.getElementById("skip").addEventListener("click", skip);
  submitButton.addEventListener("click", submitChosen);
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

  // "by you" is always the server's count, from the answer's or undo's own reply; a periodic
  // state reply asked for before the latest write is older than it and is not shown.
  let writes = 0;
  function showMine(you) {
    if (!you) return;
    writes += 1;
    mine = you.labelled;
    document.getElementById("stat-mine").textContent = mine;
  }

  async function refresh() {
    try {
      const asked = writes;
      const state = await AB.call("GET", "/api/state");
      if (asked !== writes || busy) delete state.you;
      document.getElementById("project").textContent = state.source;
      document.getElementById("stat-labelled").textContent = state.counts.labelled + " of " + state.counts.items;
      document.getElementById("stat-rounds").textContent = state.rounds;
      if (state.you) { mine = state.you.labelled; document.getElementById("stat-mine").textContent = mine; }
      const acc = state.accuracy;
      // a multi-label project is scored by micro-F1 over the label decisions, never as whole sets
      const metric = state.multilabel ? "micro-F1" : "accuracy";
      let text = acc.prequential === null ? "–" : AB.percent(acc.prequential) + " (last " + acc.prequential_n + ")";
      if (acc.test !== null && acc.test !== undefined) text += " · test " + AB.percent(acc.test);
      document.getElementById("stat-accuracy-name").textContent = "held-out " + metric;
      const shown = document.getElementById("stat-accuracy");
      shown.textContent = text;
      shown.title = state.multilabel
        ? "prequential micro-F1: the current model's label decisions (classes with p >= 50%) for the items you " +
          "label, made before it saw their labels, scored class by class against your answers"
        : "prequential: the current model's predictions for the items you label, made before it saw their labels";
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
    multilabel = !!state.multilabel;
    submitButton.hidden = !multilabel;
    document.getElementById("toggle-help").hidden = !multilabel;
    keys = classKeys(classes);
    skipKeys = keys.some((key) => key.toLowerCase() === "s") ? [" "] : [" ", "s", "S"];
    classes.forEach((name, index) => {
      const key = keys[index];
      const button = AB.el("button", { type: "button", "data-label": name, "data-key": key }, [
        ...(key ? [AB.el("kbd", { text: key })] : []), document.createTextNode(" " + name)]);
      button.addEventListener("click", () => answer(index));
      classesBox.appendChild(button);
    });
    document.getElementById("skip-key").textContent = skipKeys.length > 1 ? "S" : "Space";
    const own = keys.filter((key, i) => key === classes[i]).length;
    document.getElementById("key-help").textContent = own === classes.length
      ? "each class's own name" : own || keys.some((key) => /[a-z]/.test(key)) ? "the key on each button"
        : "the number on each button";
    const data = await AB.call("POST", "/api/next", {});
    show(data.item, data.message);
    document.body.dataset.ready = "1";
    setInterval(refresh, 3000);
  }

  start();
})();
