"""Trace sections: a deterministic tree of tasks → subtasks → steps over a trace's recorded steps."""

from stash_labeler.sections.grouping import TASK_LABEL_KEY, Section, group_sections
from stash_labeler.sections.work import work_of

__all__ = ["TASK_LABEL_KEY", "Section", "group_sections", "work_of"]
