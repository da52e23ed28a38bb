"""Starts in place of the child runtime, prints and exits 0 without the start-up handshake
(what a planted or broken runtime would do): the host must report an error."""
print("all done, honestly", flush=True)
