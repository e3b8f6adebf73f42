/* The new-study form's pruning section: only the settings the chosen pruner reads are shown
 * (the others are not sent, so they keep their defaults), with a line on what the pruner does.
 * Hyperband has its own halving: the server refuses a pruner with it, and the page says so
 * first. Without JavaScript every setting stays visible and the server checks them. */
(function () {
  const form = document.getElementById("study-form");
  const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "{}");
  if (!form || !form.elements["pruner"]) return;
  const explained = read("pruners-explained");
  const applies = read("pruning-applies");
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

  pruner.addEventListener("change", update);
  if (tuner) tuner.addEventListener("change", update);
  update();
})();
