/*
 * Search-space editor for the study form (templates/studies/_search_space_editor.html).
 *
 * The <textarea name="search_space"> holding the JSON rows stays the source of truth the
 * server reads: this script turns it into one editable row per hyperparameter and writes
 * the JSON back on every change. Without JavaScript the textarea is the editor.
 * Rules and messages live on the server (experiments/tuning/search_space.py); this script only
 * shapes the JSON and shows the server's per-row errors.
 */
(function () {
  "use strict";

  const TYPES = [["int", "Int"], ["float", "Float"], ["choice", "Choice"],
    ["boolean", "Boolean"], ["fixed", "Fixed"]];
  const SAMPLINGS = { int: ["linear", "log"], float: ["linear", "log", "reverse_log"] };
  // Same patterns as experiments/tuning/search_space.py, so both sides infer the same types.
  const INT_TEXT = /^[+-]?\d+$/;
  const FLOAT_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

  // JSON.parse and JSON.stringify turn 1.0 into 1, which would silently change a Choice
  // of floats (or a Fixed 1.0) into ints. Floats are therefore carried in a wrapper.
  class FloatValue {
    constructor(value) { this.value = value; }
  }
  const FLOAT_KEY = "__tuneboard_float__";
  const STRING_OR_NUMBER = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

  function formatFloat(value) {
    if (!Number.isFinite(value)) return "null";
    const text = String(value);
    return /[.eE]/.test(text) ? text : text + ".0";
  }

  function parseJsonKeepingFloats(text) {
    const marked = text.replace(STRING_OR_NUMBER, (token) =>
      token[0] === '"' || /^-?\d+$/.test(token) ? token : `{"${FLOAT_KEY}":${token}}`);
    return JSON.parse(marked, (key, value) =>
      value !== null && typeof value === "object" && Object.hasOwn(value, FLOAT_KEY)
        ? new FloatValue(value[FLOAT_KEY]) : value);
  }

  function toJson(value) {
    if (value instanceof FloatValue) return formatFloat(value.value);
    if (Array.isArray(value)) return "[" + value.map(toJson).join(", ") + "]";
    if (value !== null && typeof value === "object") {
      return "{" + Object.entries(value)
        .map(([key, item]) => JSON.stringify(key) + ": " + toJson(item)).join(", ") + "}";
    }
    return JSON.stringify(value) ?? "null";
  }

  function textKind(text) {
    const lowered = text.toLowerCase();
    if (lowered === "true" || lowered === "false") return "bool";
    if (INT_TEXT.test(text)) return "int";
    if (FLOAT_TEXT.test(text)) return "float";
    return "str";
  }

  // Mirror of parse_choice_values(): one type for the whole list.
  function parseChoiceValues(text) {
    const items = String(text).split(",").map((item) => item.trim()).filter(Boolean);
    const kinds = new Set(items.map(textKind));
    if (kinds.size === 1 && kinds.has("bool")) return items.map((i) => i.toLowerCase() === "true");
    if (kinds.size === 1 && kinds.has("int")) return items.map(Number);
    if (items.length && [...kinds].every((k) => k === "int" || k === "float")) {
      return items.map((item) => new FloatValue(Number(item)));
    }
    return items;
  }

  function choiceIsNumeric(text) {
    const values = parseChoiceValues(text);
    return values.length > 0 && values.every((v) => typeof v === "number" || v instanceof FloatValue);
  }

  // More digits than a double holds (or beyond its range): sent as typed, so the server refuses
  // it with its reason instead of the page rounding 0.999…9 to 1 or 10**400 to Infinity.
  function tooPrecise(text) {
    const digits = text.replace(/[eE].*$/, "").replace(/[^0-9]/g, "").replace(/^0+/, "");
    return digits.length > 15 || !Number.isFinite(Number(text));
  }

  function parseScalar(text) {
    const trimmed = text.trim();
    const kind = trimmed ? textKind(trimmed) : "str";
    if (kind === "bool") return trimmed.toLowerCase() === "true";
    if ((kind === "int" || kind === "float") && tooPrecise(trimmed)) return trimmed;
    if (kind === "int") return Number(trimmed);
    if (kind === "float") return new FloatValue(Number(trimmed));
    return trimmed;
  }

  // A bound: a number when it looks like one, else the raw text so the server can explain.
  function parseNumber(text) {
    const trimmed = text.trim();
    if (!trimmed) return null;
    const numeric = INT_TEXT.test(trimmed) || FLOAT_TEXT.test(trimmed);
    return numeric && !tooPrecise(trimmed) ? Number(trimmed) : trimmed;
  }

  function valueText(value) {
    if (value === null || value === undefined) return "";
    if (value instanceof FloatValue) return formatFloat(value.value);
    if (Array.isArray(value)) return value.map(valueText).join(", ");
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  // --- Drafts: what a row's inputs hold, as typed --------------------------------------

  function draftFromRow(row, errors) {
    const raw = row !== null && typeof row === "object" && !Array.isArray(row) ? row : {};
    return {
      name: valueText(raw.name),
      type: raw.type ? String(raw.type).toLowerCase() : "int",
      min: valueText(raw.min),
      max: valueText(raw.max),
      step: valueText(raw.step),
      sampling: raw.sampling ? String(raw.sampling).toLowerCase() : "linear",
      values: valueText(raw.values),
      ordered: typeof raw.ordered === "boolean" ? raw.ordered : null, // null: by the values
      value: valueText(raw.value),
      parent: raw.parent ? String(raw.parent) : "",
      parentValues: valueText(raw.parent_values),
      errors: Array.isArray(errors) ? errors.map(String) : [],
    };
  }

  function isBlank(draft) {
    return ["name", "min", "max", "step", "values", "value", "parent"]
      .every((key) => !draft[key].trim());
  }

  // KerasTuner orders numeric choices by default and refuses to order anything else.
  function effectiveOrdered(draft) {
    return choiceIsNumeric(draft.values) ? draft.ordered ?? true : false;
  }

  function rowFromDraft(draft) {
    const row = { name: draft.name.trim(), type: draft.type };
    if (draft.type === "int" || draft.type === "float") {
      row.min = parseNumber(draft.min);
      row.max = parseNumber(draft.max);
      row.step = parseNumber(draft.step);
      row.sampling = draft.sampling;
    } else if (draft.type === "choice") {
      row.values = parseChoiceValues(draft.values);
      row.ordered = effectiveOrdered(draft);
    } else if (draft.type === "fixed") {
      row.value = parseScalar(draft.value);
    }
    row.parent = draft.parent || null;
    row.parent_values = draft.parent ? parseChoiceValues(draft.parentValues) : [];
    return row;
  }

  // --- DOM helpers ---------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === false || value === null || value === undefined) continue;
      node.setAttribute(key, value === true ? "" : value);
    }
    node.append(...children);
    return node;
  }

  function labelled(text, control, field) {
    return el("label", { class: `hp-field hp-field-${field}` },
      el("span", { class: "hp-label" }, text), control);
  }

  function textInput(field, value, attrs) {
    const input = el("input", { type: "text", "data-field": field, autocomplete: "off", ...attrs });
    input.value = value;
    return input;
  }

  function selectInput(field, options, selected, unknown = "unknown") {
    const select = el("select", { "data-field": field });
    fillOptions(select, options, selected, unknown);
    return select;
  }

  function fillOptions(select, options, selected, unknown) {
    const known = options.some(([value]) => value === selected);
    // Keep an unknown value (a deleted parent, an odd type) visible rather than lose it.
    const all = known ? options : [...options, [selected, `${selected} (${unknown})`]];
    select.replaceChildren(...all.map(([value, text]) => el("option", { value }, text)));
    select.value = selected;
  }

  // --- The editor ----------------------------------------------------------------------

  function createEditor(textarea, editor, spaces, serverErrors) {
    const rowsEl = editor.querySelector("#hp-rows");
    const emptyEl = editor.querySelector("#hp-empty");
    const statusEl = editor.querySelector("#hp-status");
    const form = textarea.form;
    const hypermodel = (form || document).querySelector('select[name="hypermodel"]');
    let drafts = [];

    function save() {
      const rows = drafts.map(rowFromDraft);
      textarea.value = rows.length ? "[\n  " + rows.map(toJson).join(",\n  ") + "\n]" : "[]";
      emptyEl.hidden = drafts.length > 0;
    }

    function parentOptions(draft) {
      const names = drafts.map((d) => d.name.trim()).filter((n) => n && n !== draft.name.trim());
      return [["", "always"], ...[...new Set(names)].map((n) => [n, n])];
    }

    function parentHint(name) {
      const parent = drafts.find((d) => d.name.trim() === name);
      if (!parent) return "";
      if (parent.type === "choice") return parseChoiceValues(parent.values).map(valueText)[0] || "";
      if (parent.type === "boolean") return "true";
      return parent.type === "fixed" ? parent.value : parent.min;
    }

    function typeFields(draft) {
      if (draft.type === "int" || draft.type === "float") {
        const samplings = SAMPLINGS[draft.type].map((s) => [s, s.replace("_", " ")]);
        return [
          labelled("Min", textInput("min", draft.min, { inputmode: "decimal" }), "min"),
          labelled("Max", textInput("max", draft.max, { inputmode: "decimal" }), "max"),
          labelled("Step", textInput("step", draft.step,
            { inputmode: "decimal", placeholder: "optional" }), "step"),
          labelled("Sampling", selectInput("sampling", samplings, draft.sampling), "sampling"),
        ];
      }
      if (draft.type === "choice") {
        const ordered = el("input", { type: "checkbox", "data-field": "ordered" });
        ordered.checked = effectiveOrdered(draft);
        ordered.disabled = !choiceIsNumeric(draft.values);
        return [
          labelled("Values (comma-separated)",
            textInput("values", draft.values, { placeholder: "relu, tanh" }), "values"),
          el("label", { class: "hp-field hp-field-ordered hp-check" }, ordered,
            el("span", { class: "hp-label" }, "Ordered")),
        ];
      }
      if (draft.type === "fixed") {
        return [labelled("Value", textInput("value", draft.value, { placeholder: "adam" }), "value")];
      }
      return [];
    }

    function renderRow(draft, index) {
      const row = el("div", { class: "hp-row" + (draft.errors.length ? " has-error" : ""),
        "data-index": index, role: "group", "aria-label": `Hyperparameter ${index + 1}` });
      const parentValues = labelled("is one of",
        textInput("parent_values", draft.parentValues, { placeholder: parentHint(draft.parent) }),
        "parent_values");
      parentValues.hidden = !draft.parent;
      const remove = el("button", { type: "button", class: "hp-remove",
        "aria-label": `Remove hyperparameter ${draft.name.trim() || index + 1}` }, "Remove");
      row.append(el("div", { class: "hp-fields" },
        labelled("Name", textInput("name", draft.name,
          { placeholder: "units", spellcheck: "false" }), "name"),
        labelled("Type", selectInput("type", TYPES, draft.type), "type"),
        ...typeFields(draft),
        labelled("Only when", selectInput("parent", parentOptions(draft), draft.parent, "missing"), "parent"),
        parentValues,
        el("div", { class: "hp-field hp-field-remove" }, remove)));
      if (draft.errors.length) {
        row.append(el("ul", { class: "hp-errors", role: "alert" },
          ...draft.errors.map((message) => el("li", {}, message))));
      }
      return row;
    }

    function renderAll() {
      rowsEl.replaceChildren(...drafts.map(renderRow));
      save();
    }

    function rowElement(index) {
      return rowsEl.querySelector(`.hp-row[data-index="${index}"]`);
    }

    function rerenderRow(index, focusField) {
      const fresh = renderRow(drafts[index], index);
      rowElement(index).replaceWith(fresh);
      fresh.querySelector(`[data-field="${focusField}"]`)?.focus();
    }

    function refreshParents() {
      drafts.forEach((draft, index) => {
        const select = rowElement(index).querySelector('[data-field="parent"]');
        fillOptions(select, parentOptions(draft), draft.parent, "missing");
      });
    }

    // Children follow a renamed parent, so a rename does not silently drop conditions.
    function rename(draft, text) {
      const before = draft.name.trim();
      const after = text.trim();
      draft.name = text;
      if (before && after && before !== after) {
        drafts.filter((d) => d !== draft && d.parent === before).forEach((d) => { d.parent = after; });
      }
      refreshParents();
    }

    function onEdit(event) {
      const target = event.target;
      const field = target.dataset.field;
      const rowEl = target.closest(".hp-row");
      if (!field || !rowEl) return;
      // Selects and checkboxes fire both events; act once, on "change".
      if (event.type === "input" && (target.tagName === "SELECT" || target.type === "checkbox")) return;
      const index = Number(rowEl.dataset.index);
      const draft = drafts[index];
      if (field === "name") {
        rename(draft, target.value);
      } else if (field === "type") {
        draft.type = target.value;
        if (SAMPLINGS[draft.type] && !SAMPLINGS[draft.type].includes(draft.sampling)) {
          draft.sampling = "linear";
        }
        rerenderRow(index, "type");
      } else if (field === "ordered") {
        draft.ordered = target.checked;
      } else if (field === "values") {
        draft.values = target.value;
        const ordered = rowEl.querySelector('[data-field="ordered"]');
        ordered.disabled = !choiceIsNumeric(draft.values);
        ordered.checked = effectiveOrdered(draft);
      } else if (field === "parent") {
        draft.parent = target.value;
        const values = rowEl.querySelector('[data-field="parent_values"]');
        values.closest(".hp-field").hidden = !draft.parent;
        values.placeholder = parentHint(draft.parent);
      } else if (field === "parent_values") {
        draft.parentValues = target.value;
      } else {
        draft[field] = target.value; // min, max, step, sampling, value
      }
      save();
    }

    function remove(index) {
      drafts.splice(index, 1);
      renderAll();
      const next = rowElement(Math.min(index, drafts.length - 1));
      (next ? next.querySelector(".hp-remove") : editor.querySelector("#hp-add")).focus();
      statusEl.textContent = "Hyperparameter removed.";
    }

    function add() {
      drafts.push(draftFromRow({}));
      renderAll();
      rowElement(drafts.length - 1).querySelector('[data-field="name"]').focus();
      statusEl.textContent = "";
    }

    function loadDefaults() {
      const name = hypermodel ? hypermodel.value : "";
      const rows = spaces[name];
      if (!Array.isArray(rows) || rows.length === 0) {
        statusEl.textContent = name ? `The ${name} hypermodel has no default hyperparameters.`
          : "Choose a hypermodel first.";
        return;
      }
      drafts = rows.map((row) => draftFromRow(row));
      renderAll();
      statusEl.textContent = `Loaded the ${name} defaults.`;
    }

    rowsEl.addEventListener("input", onEdit);
    rowsEl.addEventListener("change", onEdit);
    rowsEl.addEventListener("click", (event) => {
      const button = event.target.closest(".hp-remove");
      if (button) remove(Number(button.closest(".hp-row").dataset.index));
    });
    editor.querySelector("#hp-add").addEventListener("click", add);
    editor.querySelector("#hp-reset").addEventListener("click", loadDefaults);
    // Switching hypermodel brings its defaults, unless the person has edited the space.
    let edited = editor.dataset.bound === "1";
    rowsEl.addEventListener("input", () => { edited = true; });
    rowsEl.addEventListener("click", (event) => { if (event.target.closest(".hp-remove")) edited = true; });
    editor.querySelector("#hp-add").addEventListener("click", () => { edited = true; });
    editor.querySelector("#hp-reset").addEventListener("click", () => { edited = false; });
    hypermodel?.addEventListener("change", () => {
      if (!edited || drafts.every(isBlank)) {
        loadDefaults();
        edited = false;
      }
    });

    return {
      load(rows) {
        drafts = rows.map((row, index) => draftFromRow(row, serverErrors[String(index)]));
        renderAll();
      },
    };
  }

  function readJsonScript(id) {
    const node = document.getElementById(id);
    if (!node) return null;
    try {
      return parseJsonKeepingFloats(node.textContent);
    } catch (error) {
      return null;
    }
  }

  function init() {
    const textarea = document.getElementById("id_search_space");
    const editor = document.getElementById("hp-editor");
    if (!textarea || !editor) return;
    let rows;
    try {
      rows = textarea.value.trim() ? parseJsonKeepingFloats(textarea.value) : [];
    } catch (error) {
      return; // Not JSON: leave the text box, and the server's message, for the person to fix.
    }
    if (!Array.isArray(rows)) return;
    const errors = readJsonScript("search-space-errors");
    const spaces = readJsonScript("hypermodel-spaces");
    const editorApi = createEditor(textarea, editor,
      spaces && typeof spaces === "object" ? spaces : {},
      errors && typeof errors === "object" ? errors : {});
    editorApi.load(rows);
    document.getElementById("hp-fallback").hidden = true;
    editor.hidden = false;
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
