"""What a request means to the driver: the pools' facts, what it owns (its tags),
what it may delete and how (``volume_clear``), manage/unmanage and retype."""
