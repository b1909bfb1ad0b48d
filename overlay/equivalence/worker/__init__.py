"""The worker side: the processes that lower and run, the only code that runs torch."""
