"""LVM's commands for one VG (``VolumeGroup``) and the argv of each, validated before
any process starts and built once for the root path and the privileged daemon."""
