"""What runs in and around DataLoader workers: the stall watchdog, errors that keep their context,
workers that end with their parent, sockets for their temporaries, batches packed in one buffer a dtype.
It imports ``contracts``.
"""
