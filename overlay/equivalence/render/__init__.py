"""The equivalence report, laid out once as blocks and as its typed JSON document."""
