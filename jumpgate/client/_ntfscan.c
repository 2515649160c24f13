/*
 * _ntfscan: find the tuples of one NTF stream (contract §3) without a Python loop per tuple.
 *
 * A stream's tuples are a chain of u32 length prefixes, so their boundaries can only be found by
 * walking the chain; this module does that walk in C and hands back the start offsets as a
 * bytearray of little-endian int64 (wrapped by numpy.frombuffer on the Python side, so the build
 * needs no numpy headers). Everything after the walk is vectorized numpy in jumpgate.client.ntf.
 *
 *   scan(buffer, start, min_len, max_len) -> bytearray of int64 tuple start offsets
 *
 * `buffer` holds one whole stream; `start` is where the first length prefix is (8: after the
 * "NTF1" + stream id header). Every tuple length L must satisfy 1 <= min_len <= L <= max_len
 * < 2^31; the chain must end with the end marker (u32 0, u64 count) exactly at the end of the
 * buffer, and count must equal the number of tuples. Any violation raises ValueError with the
 * byte offset and tuple number. The GIL is released during the walk.
 *
 *   gather(buffer, starts, lengths, out) -> None
 *
 * Copies buffer[starts[i] : starts[i] + lengths[i]] for each i back to back into `out` (all
 * int64 arrays passed through the buffer protocol; `out` writable and exactly sum(lengths) long).
 * Bounds are checked. Used to build Arrow string data from string fields scattered over tuples.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint32_t load_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t load_u64(const unsigned char *p) {
    return (uint64_t)load_u32(p) | ((uint64_t)load_u32(p + 4) << 32);
}

enum scan_status {
    SCAN_OK = 0,
    SCAN_NO_END_MARKER,   /* EOF in the middle of a length prefix (or no prefix at all) */
    SCAN_TRUNCATED_TUPLE, /* the tuple's bytes run past the end of the buffer */
    SCAN_BAD_LENGTH,      /* L outside [min_len, max_len] */
    SCAN_TRUNCATED_COUNT, /* end marker without its complete u64 count */
    SCAN_COUNT_MISMATCH,  /* count differs from the number of tuples */
    SCAN_TRAILING,        /* bytes after the end marker */
};

struct scan_result {
    enum scan_status status;
    Py_ssize_t pos;     /* byte offset of the offending length prefix / marker */
    uint64_t ntuples;   /* tuples seen before the problem (or in total) */
    uint64_t value;     /* the offending length or count */
};

/* One walk over the chain. With `out` NULL it only validates and counts. */
static void walk(const unsigned char *buf, Py_ssize_t size, Py_ssize_t start, uint64_t min_len,
                 uint64_t max_len, int64_t *out, struct scan_result *r) {
    Py_ssize_t pos = start;
    uint64_t n = 0;
    for (;;) {
        if (size - pos < 4) {
            r->status = SCAN_NO_END_MARKER;
            break;
        }
        uint64_t len = load_u32(buf + pos);
        if (len == 0) {
            if (size - pos < 12) {
                r->status = SCAN_TRUNCATED_COUNT;
                break;
            }
            uint64_t count = load_u64(buf + pos + 4);
            if (count != n) {
                r->status = SCAN_COUNT_MISMATCH;
                r->value = count;
            } else if (size - pos != 12) {
                r->status = SCAN_TRAILING;
                r->value = (uint64_t)(size - pos - 12);
            } else {
                r->status = SCAN_OK;
            }
            break;
        }
        if (len < min_len || len > max_len) {
            r->status = SCAN_BAD_LENGTH;
            r->value = len;
            break;
        }
        if ((uint64_t)(size - pos - 4) < len) {
            r->status = SCAN_TRUNCATED_TUPLE;
            r->value = len;
            break;
        }
        if (out != NULL) out[n] = (int64_t)(pos + 4);
        n++;
        pos += 4 + (Py_ssize_t)len;
    }
    r->pos = pos;
    r->ntuples = n;
}

static PyObject *scan_error(const struct scan_result *r, Py_ssize_t size, uint64_t min_len,
                            uint64_t max_len) {
    unsigned long long n = (unsigned long long)r->ntuples, v = (unsigned long long)r->value;
    long long pos = (long long)r->pos;
    switch (r->status) {
    case SCAN_NO_END_MARKER:
        return PyErr_Format(PyExc_ValueError,
                            "stream ended before its end marker: end of data at byte %lld after %llu tuples",
                            (long long)size, n);
    case SCAN_TRUNCATED_TUPLE:
        return PyErr_Format(PyExc_ValueError,
                            "truncated tuple %llu: length prefix at byte %lld says %llu bytes, only %lld remain",
                            n, pos, v, (long long)(size - pos - 4));
    case SCAN_BAD_LENGTH:
        if (v > 0x7fffffffULL)
            return PyErr_Format(PyExc_ValueError,
                                "tuple %llu at byte %lld: length %llu is not below 2^31", n, pos, v);
        if (min_len == max_len)
            return PyErr_Format(PyExc_ValueError,
                                "tuple %llu at byte %lld: length %llu, but the layout's tuples are %llu bytes",
                                n, pos, v, (unsigned long long)min_len);
        return PyErr_Format(PyExc_ValueError,
                            "tuple %llu at byte %lld: length %llu is outside %llu..%llu (the layout's fixed size "
                            "is the minimum)", n, pos, v, (unsigned long long)min_len,
                            (unsigned long long)max_len);
    case SCAN_TRUNCATED_COUNT:
        return PyErr_Format(PyExc_ValueError,
                            "end marker at byte %lld is cut short: its u64 tuple count is incomplete", pos);
    case SCAN_COUNT_MISMATCH:
        return PyErr_Format(PyExc_ValueError,
                            "end marker at byte %lld counts %llu tuples but %llu were received", pos, v, n);
    case SCAN_TRAILING:
        return PyErr_Format(PyExc_ValueError,
                            "%llu bytes follow the end marker at byte %lld (a zero-length tuple, or data "
                            "after the end of the stream)", v, pos);
    default:
        return PyErr_Format(PyExc_SystemError, "ntfscan: unknown status %d", (int)r->status);
    }
}

static PyObject *ntfscan_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    unsigned long long min_len, max_len;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nKK:scan", &view, &start, &min_len, &max_len)) return NULL;
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "start %zd outside the buffer (%zd bytes)", start, view.len);
    }
    if (min_len < 1) min_len = 1;
    if (max_len > 0x7fffffffULL) max_len = 0x7fffffffULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    struct scan_result r = {SCAN_OK, 0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    walk(buf, view.len, start, min_len, max_len, NULL, &r);
    Py_END_ALLOW_THREADS
    if (r.status != SCAN_OK) {
        scan_error(&r, view.len, min_len, max_len);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint64_t n = r.ntuples;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int64_t)));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *starts = (int64_t *)PyByteArray_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    walk(buf, view.len, start, min_len, max_len, starts, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return out;
}

static int get_i64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a contiguous int64 array", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *ntfscan_gather(PyObject *self, PyObject *args) {
    PyObject *src_obj, *starts_obj, *lengths_obj, *out_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:gather", &src_obj, &starts_obj, &lengths_obj, &out_obj)) return NULL;
    Py_buffer src, st, ln, out;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (get_i64_buffer(starts_obj, &st, 0, "starts") < 0) goto fail_src;
    if (get_i64_buffer(lengths_obj, &ln, 0, "lengths") < 0) goto fail_st;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto fail_ln;
    if (st.len != ln.len) {
        PyErr_SetString(PyExc_ValueError, "starts and lengths differ in length");
        goto fail_out;
    }
    Py_ssize_t n = st.len / 8;
    const int64_t *s = (const int64_t *)st.buf, *l = (const int64_t *)ln.buf;
    const unsigned char *in = (const unsigned char *)src.buf;
    unsigned char *o = (unsigned char *)out.buf;
    Py_ssize_t bad = -1, pos = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = s[i], k = l[i];
        if (a < 0 || k < 0 || a > src.len - k || k > out.len - pos) {
            bad = i;
            break;
        }
        memcpy(o + pos, in + a, (size_t)k);
        pos += k;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "gather: range %zd is outside the source or overflows the output", bad);
        goto fail_out;
    }
    if (pos != out.len) {
        PyErr_Format(PyExc_ValueError, "gather: filled %zd of %zd output bytes", pos, out.len);
        goto fail_out;
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&ln);
    PyBuffer_Release(&st);
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
fail_out:
    PyBuffer_Release(&out);
fail_ln:
    PyBuffer_Release(&ln);
fail_st:
    PyBuffer_Release(&st);
fail_src:
    PyBuffer_Release(&src);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", ntfscan_scan, METH_VARARGS,
     "scan(buffer, start, min_len, max_len) -> bytearray of int64 tuple start offsets"},
    {"gather", ntfscan_gather, METH_VARARGS,
     "gather(buffer, starts, lengths, out): copy the byte ranges back to back into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ntfscan", "Native framing scan of NTF streams (contract §3).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ntfscan(void) { return PyModule_Create(&module); }
