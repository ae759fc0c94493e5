from kiosk.sync.triple_buffer import TripleBuffer

__all__ = ["TripleBuffer"]
