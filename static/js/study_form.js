/* The new-study form's Bayesian setting: shown only for Bayesian optimisation, with the number
 * an empty field means for the search space on the page (KerasTuner's default, 3 x the number
 * of hyperparameters) and a warning when every trial would be an initial random one. Without
 * JavaScript the field simply stays visible and the server checks it. */
(function () {
  const form = document.getElementById("study-form");
  const field = document.getElementById("initial-random-field");
  if (!form || !field) return;
  const tuner = form.elements["tuner"];
  const input = form.elements["initial_random_trials"];
  const maxTrials = form.elements["max_trials"];
  const space = form.elements["search_space"];
  const shownDefault = document.getElementById("initial-random-default");
  const warning = document.getElementById("initial-random-warning");

  function hyperparameterCount() {
    try {
      const rows = JSON.parse(space.value);
      return Array.isArray(rows) ? rows.length : 0;
    } catch (error) {
      return 0;  // the editor shows what is wrong with the JSON
    }
  }

  function update() {
    const bayesian = tuner.value === "bayesian";
    field.hidden = !bayesian;
    input.disabled = !bayesian;  // a disabled field is not sent: other tuners never get it
    const fallback = Math.max(3 * hyperparameterCount(), 3);
    shownDefault.textContent = fallback;
    const initial = parseInt(input.value, 10) || fallback;
    const trials = parseInt(maxTrials.value, 10);
    const pureRandom = bayesian && trials > 0 && trials <= initial;
    warning.hidden = !pureRandom;
    warning.textContent = pureRandom
      ? `With ${trials} max trials and ${initial} initial random trials, this study is a random search: ` +
        "raise max trials or set fewer initial random trials."
      : "";
  }

  // The search-space editor rewrites the JSON after its own input handlers run.
  form.addEventListener("input", () => setTimeout(update, 0));
  form.addEventListener("change", () => setTimeout(update, 0));
  form.addEventListener("click", () => setTimeout(update, 0));
  update();
})();

/* Hypermodels that do not fit the chosen dataset's kind are greyed out with the reason; the
 * server refuses them anyway. */
(function () {
  const form = document.getElementById("study-form");
  const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "{}");
  if (!form) return;
  const datasetKinds = read("dataset-kinds");
  const hypermodelKinds = read("hypermodel-kinds");
  const dataset = form.elements["dataset"];
  const hypermodel = form.elements["hypermodel"];
  const note = document.getElementById("hypermodel-fit");
  const names = { tabular: "tabular rows", image: "images", text: "text", sequence: "sequences" };
  if (!dataset || !hypermodel || !note) return;

  function update() {
    const kind = datasetKinds[dataset.value];
    const unfit = [];
    for (const option of hypermodel.options) {
      const kinds = hypermodelKinds[option.value] || [];
      const fits = !kind || kinds.includes(kind);
      option.disabled = !fits;
      option.title = fits ? "" : `Takes ${kinds.map((k) => names[k] || k).join(", ")}; this dataset holds ${names[kind]}.`;
      if (!fits) unfit.push(`${option.value} (takes ${kinds.map((k) => names[k] || k).join(", ")})`);
    }
    if (hypermodel.selectedOptions[0]?.disabled) {
      const first = [...hypermodel.options].find((option) => !option.disabled);
      if (first) {
        hypermodel.value = first.value;
        hypermodel.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }
    note.textContent = kind && unfit.length
      ? `This dataset holds ${names[kind]}; not offered: ${unfit.join("; ")}.` : "";
  }

  dataset.addEventListener("change", update);
  update();
})();
