"""Running LVM: argv lists to processes (or one long-lived ``lvm`` shell), their output
to results and typed errors, and the name rules checked before anything starts."""
