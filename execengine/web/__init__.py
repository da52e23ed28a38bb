"""The web layer behind ``web_extract`` and ``web_search``.

``fetch`` (bounded HTTP(S) with the SSRF guard of ``guard``), ``encoding`` (content
decoding and charsets), ``convert`` (pages to readable text), ``spill`` (head + tail
truncation with the full text kept on disk) and ``providers`` (search back-ends).
"""

from __future__ import annotations
