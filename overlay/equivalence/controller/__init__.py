"""The controller side: everything that decides what runs where, torch-free.

:mod:`.options` (what to run; the fields a report records), :mod:`.inputs` (every user
input checked before a worker starts), :mod:`.orchestrator` (one run: environments, cache
keys, selection, verdicts), :mod:`.scheduler` (worker slots per path, attribution),
:mod:`.processes` (one worker process: start, request, timeout, restart),
:mod:`.result_cache` (results by content key), :mod:`.progress` (events for the CLI),
:mod:`.outcome` (the typed report of a run, its next steps), :mod:`.merge` (shard reports
joined into one).
"""
