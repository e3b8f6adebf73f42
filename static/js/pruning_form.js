/* The new-study form's pruning section: only the settings the chosen pruner reads are shown
 * (the others are not sent, so they keep their defaults), with a line on what the pruner does.
 * Hyperband has its own halving: the server refuses a pruner with it, and the page says so
 * first. A setting still at the last pruner's default takes the new pruner's (the rung pruners start
 * judging at once, the others after 5 trials). Without JavaScript every setting stays visible and the
 * server checks them. */
(function () {
  const form = document.getElementById("study-form");
  const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "{}");
  if (!form || !form.elements["pruner"]) return;
  const explained = read("pruners-explained");
  const applies = read("pruning-applies");
  const defaults = read("pruning-defaults");
  const pruner = form.elements["pruner"];
  const tuner = form.elements["tuner"];
  const note = document.getElementById("pruner-explained");

  function update() {
    const shown = applies[pruner.value] || [];
    for (const field of form.querySelectorAll("[data-pruning-setting]")) {
      const visible = shown.includes(field.dataset.pruningSetting);
      field.hidden = !visible;
      for (const input of field.querySelectorAll("input, select")) input.disabled = !visible;
    }
    let text = explained[pruner.value] || "";
    if (tuner && tuner.value.startsWith("hyperband") && pruner.value !== "none") {
      text = "Hyperband already stops weak trials early (successive halving inside its brackets): choose no " +
        "pruner, or another tuner.";
    }
    if (note) note.textContent = text;
  }

  let previous = null;
  function takeDefaults() {
    const before = defaults[previous] || {};
    for (const [name, value] of Object.entries(defaults[pruner.value] || {})) {
      const input = form.elements[name];
      // Only a value the user did not type: empty, or still the previous pruner's default.
      if (input && !input.dataset.typed &&
          (input.value === "" || (name in before && Number(input.value) === before[name]))) {
        input.value = String(value);
      }
    }
    previous = pruner.value;
  }

  for (const field of form.querySelectorAll("[data-pruning-setting] input")) {
    field.addEventListener("input", () => { field.dataset.typed = "1"; });
  }
  pruner.addEventListener("change", () => { takeDefaults(); update(); });
  if (tuner) tuner.addEventListener("change", update);
  takeDefaults();
  update();
})();
