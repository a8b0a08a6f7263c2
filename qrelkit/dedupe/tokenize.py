"""Text normalization, word hashing and shingles, compiled with numba.

One tokenizer serves near-duplicate detection and CAL features. It reads the UTF-8 bytes of a
pyarrow string array directly (no Python string per passage) and:

* strips HTML tags, optional: ``<`` then a known HTML element name (:data:`HTML_ELEMENTS`, any
  case) or ``/name``, then attributes (quoted values may hold ``<`` and ``>``) and ``>``;
  ``<!-- ... -->`` comments and ``<!doctype ...>``. Anything else is text: ``<Company Inc>``,
  ``<3``, ``a < b > c``, and so is a ``<name`` not closed within 4,096 bytes;
* lower-cases (ASCII in the kernel; passages with non-ASCII text are lower-cased by pyarrow's
  Unicode ``utf8_lower`` first), optional;
* splits into words: ASCII letters, ASCII digits (only with ``keep_digits``) and non-ASCII
  letters form words; everything else separates words. "Non-ASCII letter" means a code point
  outside the punctuation and symbol blocks listed in :func:`_is_sep_cp` (Latin-1 punctuation,
  General Punctuation, currency, arrows/math/technical symbols, CJK punctuation, full-width
  punctuation, specials and emoji);
* hashes each word with 64-bit FNV-1a followed by the splitmix64 finalizer.

A shingle of words ``w1 .. wn`` hashes to the top 32 bits of the chain
``h = mix(h ^ hash(w_i))`` started at :data:`SHINGLE_SEED`; :func:`shingle_hash` computes the
same value from the shingle's text (``b"w1 w2 w3"``), so it can serve as a ``hashfunc`` for
``datasketch.MinHash``. A passage with fewer than ``n`` words is one shingle of all its words.
"""

from __future__ import annotations


import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.dedupe.params import Normalization
from qrelkit.io.strings import offsets_and_bytes

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
SHINGLE_SEED = np.uint64(0x9E3779B97F4A7C15)
MASK64 = (1 << 64) - 1


@nb.njit(inline="always", cache=True)
def mix64(z):
    """The splitmix64 finalizer of a uint64 (the hash mixer of words, shingles and band keys)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(inline="always", cache=True)
def _is_sep_cp(cp):
    """Non-ASCII code points treated as separators (punctuation and symbols)."""
    if cp < 0xC0:  # Latin-1 controls and punctuation (NBSP, inverted marks, currency, ...)
        return True
    if cp == 0xD7 or cp == 0xF7:  # multiplication and division signs
        return True
    if 0x2000 <= cp <= 0x2BFF:  # general punctuation .. misc symbols and arrows
        return True
    if 0x3000 <= cp <= 0x303F:  # CJK symbols and punctuation
        return True
    if 0xFE30 <= cp <= 0xFE4F or 0xFF00 <= cp <= 0xFF0F or 0xFF1A <= cp <= 0xFF20:
        return True
    if 0xFF3B <= cp <= 0xFF40 or 0xFF5B <= cp <= 0xFF65 or cp >= 0xFFF0 and cp <= 0xFFFF:
        return True
    if 0x1F000 <= cp <= 0x1FAFF:  # emoji and pictographs
        return True
    return False


SEP, WORD, TAG, LEAD = 0, 1, 2, 3


def byte_classes(norm: Normalization) -> np.ndarray:
    """Class of each byte value: separator, word byte, ``<``, or UTF-8 lead byte."""
    t = np.zeros(256, np.uint8)
    t[ord("a") : ord("z") + 1] = WORD
    t[ord("A") : ord("Z") + 1] = WORD
    if norm.keep_digits:
        t[ord("0") : ord("9") + 1] = WORD
    if norm.strip_html:
        t[ord("<")] = TAG
    t[0xC0:] = LEAD
    return t


def lower_table(norm: Normalization) -> np.ndarray:
    """Byte translation table (uint8[256]): ASCII upper case to lower case when ``norm.lower``, else identity."""
    t = np.arange(256, dtype=np.uint8)
    if norm.lower:
        t[ord("A") : ord("Z") + 1] += 32
    return t


@nb.njit(inline="always", cache=True)
def _lead_len(c):
    if c >= 0xF0:
        return 4
    if c >= 0xE0:
        return 3
    return 2


@nb.njit(inline="always", cache=True)
def _lead_is_word(data, i, end):
    """(length, is a word character) of the UTF-8 sequence starting at i."""
    c = data[i]
    n = _lead_len(c)
    if i + n > end:
        return end - i, False
    cp = np.int64(c & (0xFF >> (n + 1)))
    for k in range(1, n):
        cp = (cp << 6) | np.int64(data[i + k] & 0x3F)
    return n, not _is_sep_cp(cp)


# HTML elements (current and obsolete) whose tags are stripped; any other ``<name ...>`` is text.
HTML_ELEMENTS = (
    "a abbr acronym address applet area article aside audio b base basefont bdi bdo big blink blockquote body br "
    "button canvas caption center cite code col colgroup data datalist dd del details dfn dialog dir div dl dt em "
    "embed fieldset figcaption figure font footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html "
    "i iframe img input ins isindex kbd keygen label legend li link main map mark marquee menu meta meter nav nobr "
    "noframes noscript object ol optgroup option output p param picture plaintext pre progress q rp rt ruby s samp "
    "script search section select slot small source span strike strong style sub summary sup svg table tbody td "
    "template textarea tfoot th thead time title tr track tt u ul var video wbr xmp"
).split()
_TAG_NAME_MAX = 10
_TAG_MAX_BYTES = 4096


@nb.njit(inline="always", cache=True)
def _name_digit(b):
    """6-bit code of a lower-case ASCII letter (1-26) or digit (27-36)."""
    return b - 96 if b >= 97 else b - 48 + 27


def _pack(name: bytes) -> int:
    digit = getattr(_name_digit, "py_func", _name_digit)  # the Python function: no kernel loaded at import
    v = 0
    for c in name:
        v = (v << 6) | int(digit(c))
    return v


_DOCTYPE = np.frombuffer(b"doctype", np.uint8).copy()
_ELEMENT_CODES = np.array(sorted(_pack(n.encode()) for n in HTML_ELEMENTS), np.int64)


@nb.njit(inline="always", cache=True)
def _is_name_byte(b):
    return (97 <= b <= 122) or (65 <= b <= 90) or (48 <= b <= 57)


@nb.njit(inline="always", cache=True)
def _is_space(b):
    return b == 32 or 9 <= b <= 13


@nb.njit(cache=True)
def _skip_tag(data, i, end):
    """Position after the HTML tag that starts with the ``<`` at ``i``, or ``i + 1`` when the
    ``<`` does not start one (see the module doc)."""
    j = i + 1
    if j < end and data[j] == 33:  # '!': a comment or a doctype
        if j + 2 < end and data[j + 1] == 45 and data[j + 2] == 45:
            k = j + 3
            while k + 2 < end:
                if data[k] == 45 and data[k + 1] == 45 and data[k + 2] == 62:
                    return k + 3
                k += 1
            return i + 1
        if j + 7 >= end:
            return i + 1
        for t in range(7):
            if data[j + 1 + t] | 32 != _DOCTYPE[t]:
                return i + 1
        j += 8
    else:
        if j < end and data[j] == 47:  # '/': an end tag
            j += 1
        if j >= end or not (97 <= (data[j] | 32) <= 122):
            return i + 1
        code = np.int64(0)
        n = 0
        while j < end and _is_name_byte(data[j]):
            n += 1
            if n > _TAG_NAME_MAX:
                return i + 1
            code = (code << np.int64(6)) | np.int64(_name_digit(data[j] | 32))
            j += 1
        k = np.searchsorted(_ELEMENT_CODES, code)
        if k >= len(_ELEMENT_CODES) or _ELEMENT_CODES[k] != code:
            return i + 1
        if j < end and not (_is_space(data[j]) or data[j] == 47 or data[j] == 62):
            return i + 1
    # attributes up to '>'; a '<' outside quotes, or no '>' within _TAG_MAX_BYTES, means this
    # was not a tag (the bound keeps unclosed quotes from making tokenizing quadratic)
    quote = 0
    prev = 0
    stop = min(end, i + _TAG_MAX_BYTES)
    while j < stop:
        b = data[j]
        if quote:
            if b == quote:
                quote = 0
        elif b == 62:
            return j + 1
        elif b == 60:
            return i + 1
        elif (b == 34 or b == 39) and prev == 61:
            quote = b
        if not _is_space(b):
            prev = b
        j += 1
    return i + 1


@nb.njit(cache=True)
def next_word(data, i, end, cls, low):
    """Next word at or after byte i: (stop, hash), with stop < 0 when there is none.
    The hash is FNV-1a over the lower-cased bytes, then splitmix64."""
    while i < end:
        c = cls[data[i]]
        if c == WORD:
            break
        if c == LEAD:
            n, word = _lead_is_word(data, i, end)
            if word:
                break
            i += n
        elif c == TAG:
            i = _skip_tag(data, i, end)
        else:
            i += 1
    if i >= end:
        return -1, np.uint64(0)
    h = FNV_OFFSET
    while i < end:
        b = data[i]
        c = cls[b]
        if c == WORD:
            h = (h ^ np.uint64(low[b])) * FNV_PRIME
            i += 1
        elif c == LEAD:
            n, word = _lead_is_word(data, i, end)
            if not word:
                break
            for k in range(n):
                h = (h ^ np.uint64(data[i + k])) * FNV_PRIME
            i += n
        else:
            break
    return i, mix64(h)


SPECIAL = 0x200  # byte code of a byte that only the tokenizer's state machine can place


def byte_codes(norm: Normalization) -> np.ndarray:
    """What each byte is to :func:`passage_words` (uint16[256]): 0 for a separator, ``0x100 | v``
    for a word byte hashed as ``v`` (lower-cased by ``norm``), :data:`SPECIAL` for ``<`` (when
    tags are stripped) and UTF-8 lead bytes, which :func:`passage_codes` reads in context."""
    cls, low = byte_classes(norm), lower_table(norm)
    codes = np.where(cls == WORD, 0x100 | low.astype(np.uint16), 0)
    return np.where(cls >= TAG, SPECIAL, codes).astype(np.uint16)


_SAME_CODE = np.arange(SPECIAL, dtype=np.uint16)  # codes are their own codes


@nb.njit(inline="always", cache=True)
def passage_codes(data, i, end, cls, tab, codes):
    """Write to ``codes[0:end-i]`` the code of each byte of ``data[i:end]`` as :func:`next_word`
    reads it: a tag stripped and a UTF-8 sequence that is not a word character are separators
    (0); the bytes of a word character are word bytes, hashed as they are (``0x100 | byte``);
    other bytes take their code in ``tab`` (:func:`byte_codes`)."""
    s = i
    while i < end:
        b = data[i]
        c = cls[b]
        if c <= WORD:
            codes[i - s] = tab[b]
            i += 1
        elif c == TAG:
            j = _skip_tag(data, i, end)
            for q in range(i, j):
                codes[q - s] = 0
            i = j
        else:
            n, word = _lead_is_word(data, i, end)
            for q in range(i, i + n):
                codes[q - s] = (np.uint16(0x100) | np.uint16(data[q])) if word else np.uint16(0)
            i += n


@nb.njit(inline="always", cache=True)
def _hash_run(src, lo, hi, tab, out, k, h, prev):
    """Hash the words of the byte codes ``tab[src[lo:hi]]`` up to the first :data:`SPECIAL` one,
    going on from the state ``(k, h, prev)``: words found so far, the hash of the word being
    read, whether the previous byte was a word byte. A word's end is no branch: the hash is
    stored at ``out[k]`` at every byte and kept by counting it. Returns where it stopped and
    the state."""
    t = lo
    while t < hi:
        v = tab[src[t]]
        if v >= SPECIAL:
            break
        w = np.int64(v >> 8)
        out[k] = h
        k += prev & (w ^ 1)
        nxt = (h ^ np.uint64(v & 0xFF)) * FNV_PRIME
        h = nxt if w else FNV_OFFSET
        prev = w
        t += 1
    return t, k, h, prev


@nb.njit(inline="always", cache=True)
def passage_words(data, i, end, cls, tab, codes, out):
    """The words of the passage ``data[i:end]`` as :func:`next_word` finds them: writes their
    hashes to ``out`` (at least ``(end - i) // 2 + 2`` long) and returns how many. Plain bytes
    are hashed as they come; from the first ``<`` or UTF-8 lead byte on, the bytes' codes
    (:func:`passage_codes`, into ``codes``) first."""
    t, k, h, prev = _hash_run(data, i, end, tab, out, 0, FNV_OFFSET, 0)
    if t < end:
        passage_codes(data, t, end, cls, tab, codes)
        _, k, h, prev = _hash_run(codes, 0, end - t, _SAME_CODE, out, k, h, prev)
    if prev:
        out[k] = h
        k += 1
    for q in range(k):
        out[q] = mix64(out[q])
    return k


@nb.njit(cache=True)
def word_count(data, i, end, cls, low):
    """The number of words in ``data[i:end]`` (as :func:`next_word` reads them)."""
    c = 0
    while True:
        i, h = next_word(data, i, end, cls, low)
        if i < 0:
            return c
        c += 1


@nb.njit(parallel=True, cache=True)
def _count_words(data, offsets, cls, low):
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for p in nb.prange(n):
        out[p] = word_count(data, offsets[p], offsets[p + 1], cls, low)
    return out


@nb.njit(parallel=True, cache=True)
def _fill_words(data, offsets, starts, cls, low, out):
    n = len(offsets) - 1
    for p in nb.prange(n):
        i = offsets[p]
        end = offsets[p + 1]
        k = starts[p]
        while True:
            i, h = next_word(data, i, end, cls, low)
            if i < 0:
                break
            out[k] = h
            k += 1


def string_buffers(texts: pa.Array | pa.ChunkedArray, norm: Normalization) -> tuple[np.ndarray, np.ndarray]:
    """(bytes as uint8, int64 offsets) of a string array, lower-cased with Unicode rules where a
    passage is not ASCII (when ``norm.lower``). The bytes of a string array are not copied."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.large_string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if norm.lower:
        ascii_ = pc.string_is_ascii(texts)
        if not pc.all(ascii_).as_py():
            texts = pc.if_else(ascii_, texts, pc.utf8_lower(texts))
            if isinstance(texts, pa.ChunkedArray):
                texts = texts.combine_chunks()
    offsets, data = offsets_and_bytes(texts)
    return data, offsets


def word_hashes(texts: pa.Array | pa.ChunkedArray, norm: Normalization = Normalization()) -> tuple[np.ndarray, np.ndarray]:
    """Words of every passage as 64-bit hashes: ``(offsets int64[n+1], hashes uint64[total])``."""
    data, offsets = string_buffers(texts, norm)
    cls, low = byte_classes(norm), lower_table(norm)
    counts = _count_words(data, offsets, cls, low)
    starts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    out = np.empty(int(starts[-1]), np.uint64)
    _fill_words(data, offsets, starts, cls, low, out)
    return starts, out


# ---------------------------------------------------------------------------------------------
# Pure-Python reference: the same words and hashes, for users and tests.

def _py_mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def word_hash(word: bytes) -> int:
    """64-bit hash of one normalized word."""
    h = int(FNV_OFFSET)
    for c in word:
        h = ((h ^ c) * int(FNV_PRIME)) & MASK64
    return _py_mix64(h)


def shingle_hash(shingle: bytes | str) -> int:
    """32-bit hash of a shingle given as its normalized words joined by single spaces.

    Use it as ``datasketch.MinHash(num_perm=K, seed=S, hashfunc=shingle_hash)`` and update with
    the shingles of :func:`shingles` to get qrelkit's signatures.
    """
    if isinstance(shingle, str):
        shingle = shingle.encode("utf-8")
    h = int(SHINGLE_SEED)
    for w in shingle.split(b" "):
        h = _py_mix64(h ^ word_hash(w))
    return h >> 32


@nb.njit(cache=True)
def _spans(data, start, end, cls, low):
    """(start, stop) byte spans of the words in data[start:end]."""
    out = []
    i = start
    while True:
        j, h = next_word(data, i, end, cls, low)
        if j < 0:
            break
        k = j - 1  # walk back to the word's first byte
        while k > i and _in_word(data, k - 1, cls):
            k -= 1
        out.append((k, j))
        i = j
    return out


@nb.njit(cache=True)
def _in_word(data, k, cls):
    c = cls[data[k]]
    if c == WORD:
        return True
    if data[k] >= 0x80:  # inside a multi-byte sequence: find its lead byte
        m = k
        while m > 0 and 0x80 <= data[m] < 0xC0:
            m -= 1
        if cls[data[m]] == LEAD:
            n, word = _lead_is_word(data, m, len(data))
            return word and m + n > k
    return False


def words(text: str, norm: Normalization = Normalization()) -> list[str]:
    """The normalized words of ``text``, as the kernels see them."""
    data, offsets = string_buffers(pa.array([text]), norm)
    cls, low = byte_classes(norm), lower_table(norm)
    out = []
    for s, e in _spans(data, int(offsets[0]), int(offsets[1]), cls, low):
        out.append(bytes(low[data[s:e]]).decode("utf-8", errors="replace"))
    return out


def word_spans(text: str, norm: Normalization = Normalization()) -> list[tuple[int, int, str]]:
    """``(start, stop, word)`` of every word of ``text``: its place in ``text`` itself (character
    offsets, ``text[start:stop]``) and the word as :func:`words` gives it (lower-cased with
    pyarrow's Unicode rule when ``norm.lower``: the features' words). What highlights a word of
    a passage where it stands."""
    raw = np.frombuffer(text.encode("utf-8"), np.uint8)
    if not len(raw):
        return []
    cls, same = byte_classes(norm), lower_table(Normalization(lower=False))
    spans = _spans(raw, 0, len(raw), cls, same)
    if text.isascii():
        places = [(int(s), int(e)) for s, e in spans]
    else:  # byte offsets to character offsets: a character starts at each byte that is no continuation
        char = np.cumsum((raw & 0xC0) != 0x80) - 1
        places = [(int(char[s]), int(char[e - 1]) + 1) for s, e in spans]
    found = [text[s:e] for s, e in places]
    if norm.lower and found:
        found = pc.utf8_lower(pa.array(found, pa.string())).to_pylist()
    return [(s, e, w) for (s, e), w in zip(places, found)]


def shingles(text: str, n: int = 3, norm: Normalization = Normalization()) -> list[bytes]:
    """Word n-gram shingles of ``text`` as bytes (``b"w1 w2 w3"``); fewer than ``n`` words give
    one shingle of all of them; no words give none."""
    ws = [w.encode("utf-8") for w in words(text, norm)]
    if not ws:
        return []
    if len(ws) < n:
        return [b" ".join(ws)]
    return [b" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)]
