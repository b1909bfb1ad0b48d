"""The controller side: everything that decides what runs where, torch-free."""
