"""The read path: the VG's state from the PV headers, the metadata text, device-mapper
and ``lvs``, with as few LVM processes as it can be had (none while nothing changed)."""
