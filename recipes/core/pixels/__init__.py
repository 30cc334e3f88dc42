"""Images: bomb-safe decoding to uint8 CHW RGB, header reads, and ``decode="device"``'s worker side
(bytes and crop parameters) and device side (a batch decoded and augmented at once).
It imports ``contracts`` and ``sources``.
"""
