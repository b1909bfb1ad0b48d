"""The controller side: everything that decides what runs where, torch-free (each module says
which part it holds: options, inputs, orchestrator, scheduler, processes, result cache,
progress, outcome, merge)."""
