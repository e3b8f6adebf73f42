"""Trials: people's notes and tags on them. Results are immutable (trial_claims writes them once)."""

from experiments.errors import TuneboardError
from experiments.models import Trial
from experiments.tuning.bounds import control_character_problem


class TrialNotesError(TuneboardError, ValueError):
    pass


MAX_TAGS = 10
MAX_TAG_LENGTH = 30


def trial_annotate(*, trial: Trial, notes: str, tags: str) -> Trial:
    """Notes and comma-separated tags on a trial; results are untouched."""
    # No form binds these two, so their control characters are refused here (notes may have lines).
    for label, text, multiline in (("Notes", notes, True), ("Tags", tags, False)):
        if problem := control_character_problem(text, multiline=multiline):
            raise TrialNotesError(f"{label}: {problem}")
    cleaned = []
    for tag in (t.strip().lower() for t in tags.split(",")):
        if not tag or tag in cleaned:
            continue
        if len(tag) > MAX_TAG_LENGTH:
            raise TrialNotesError(f"The tag {tag[:MAX_TAG_LENGTH]!r}… is longer than {MAX_TAG_LENGTH} characters.")
        cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise TrialNotesError(f"A trial takes at most {MAX_TAGS} tags; you gave {len(cleaned)}.")
    if len(notes) > 5000:
        raise TrialNotesError("Notes are limited to 5,000 characters.")
    Trial.objects.filter(pk=trial.pk).update(notes=notes.strip(), tags=cleaned)
    trial.notes, trial.tags = notes.strip(), cleaned
    return trial
