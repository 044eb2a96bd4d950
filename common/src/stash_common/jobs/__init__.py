"""Jobs: work a service hands to a worker process (training, scoring, GEPA), one subsystem for every kind.

`dispatch` claims, prepares, launches and watches jobs (`lifecycle` is the row's states); `launch`
is what a launcher is, `local` and `kubernetes` the two, `launchers` picks one; `kinds` names each
kind's worker and `worker` is every worker's entry point; `transfer`, `files` and `reports` are how
a job's files and reports travel. docs/architecture.md tells how to add a kind.
"""
