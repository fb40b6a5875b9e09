/*
 * Read one Kafka partition straight into Arrow column buffers.
 *
 * The per-record work of the kafka_stream source (one Python object per message and per
 * field through confluent-kafka) is the source's throughput ceiling. This module does that
 * loop in C: it drives librdkafka (the copy that ships inside the confluent-kafka wheel,
 * found with dlopen at run time, so nothing links against it at build time) and hands
 * Python a few bytes objects per batch, laid out as Arrow buffers (validity bitmap,
 * int32 offsets, data). Python builds the RecordBatch from them without copying, and
 * keeps every decision (data loss, end of partition, errors) in arrow_rows.py.
 *
 * The librdkafka declarations below are the documented, stable C API of rdkafka.h
 * (messages, consumer, assignment, watermarks), written out here because the wheel
 * ships the library without its header.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* ---- librdkafka C API (subset) --------------------------------------------------------- */

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;

typedef struct {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef struct {
    char *topic;
    int32_t partition;
    int64_t offset;
    void *metadata;
    size_t metadata_size;
    void *opaque;
    int err;
    void *_private;
} rd_kafka_topic_partition_t;

typedef struct {
    int cnt;
    int size;
    rd_kafka_topic_partition_t *elems;
} rd_kafka_topic_partition_list_t;

#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0

static struct {
    const char *(*version_str)(void);
    rd_kafka_conf_t *(*conf_new)(void);
    int (*conf_set)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
    void (*conf_destroy)(rd_kafka_conf_t *);
    rd_kafka_t *(*new_handle)(int, rd_kafka_conf_t *, char *, size_t);
    void (*destroy)(rd_kafka_t *);
    int (*poll_set_consumer)(rd_kafka_t *);
    rd_kafka_topic_partition_list_t *(*list_new)(int);
    rd_kafka_topic_partition_t *(*list_add)(rd_kafka_topic_partition_list_t *, const char *, int32_t);
    void (*list_destroy)(rd_kafka_topic_partition_list_t *);
    int (*assign)(rd_kafka_t *, const rd_kafka_topic_partition_list_t *);
    rd_kafka_queue_t *(*queue_get_consumer)(rd_kafka_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    int64_t (*message_timestamp)(const rd_kafka_message_t *, int *);
    const char *(*err2str)(int);
    int (*consumer_close)(rd_kafka_t *);
    int (*query_watermark_offsets)(rd_kafka_t *, const char *, int32_t, int64_t *, int64_t *, int);
    int (*get_watermark_offsets)(rd_kafka_t *, const char *, int32_t, int64_t *, int64_t *);
} rk;

static int loaded = 0;

#define BIND(field, symbol)                                                                   \
    do {                                                                                      \
        *(void **)(&rk.field) = dlsym(handle, symbol);                                        \
        if (rk.field == NULL) {                                                               \
            PyErr_Format(PyExc_ImportError, "%s lacks the function %s", path, symbol);        \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)

static PyObject *load(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (loaded) return PyUnicode_FromString(rk.version_str()); /* bound once per process */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        PyErr_Format(PyExc_ImportError, "cannot load librdkafka from %s: %s", path, dlerror());
        return NULL;
    }
    BIND(version_str, "rd_kafka_version_str");
    BIND(conf_new, "rd_kafka_conf_new");
    BIND(conf_set, "rd_kafka_conf_set");
    BIND(conf_destroy, "rd_kafka_conf_destroy");
    BIND(new_handle, "rd_kafka_new");
    BIND(destroy, "rd_kafka_destroy");
    BIND(poll_set_consumer, "rd_kafka_poll_set_consumer");
    BIND(list_new, "rd_kafka_topic_partition_list_new");
    BIND(list_add, "rd_kafka_topic_partition_list_add");
    BIND(list_destroy, "rd_kafka_topic_partition_list_destroy");
    BIND(assign, "rd_kafka_assign");
    BIND(queue_get_consumer, "rd_kafka_queue_get_consumer");
    BIND(queue_destroy, "rd_kafka_queue_destroy");
    BIND(consume_batch_queue, "rd_kafka_consume_batch_queue");
    BIND(message_destroy, "rd_kafka_message_destroy");
    BIND(message_timestamp, "rd_kafka_message_timestamp");
    BIND(err2str, "rd_kafka_err2str");
    BIND(consumer_close, "rd_kafka_consumer_close");
    BIND(query_watermark_offsets, "rd_kafka_query_watermark_offsets");
    BIND(get_watermark_offsets, "rd_kafka_get_watermark_offsets");
    loaded = 1;
    return PyUnicode_FromString(rk.version_str());
}

/* ---- PartitionReader -------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rd_kafka_t *handle;
    rd_kafka_queue_t *queue;
    char *topic;
    int32_t partition;
    rd_kafka_message_t **pending; /* consumed, not yet handed to Python */
    size_t capacity, count, next;
    int busy; /* a call is inside librdkafka without the GIL: no other call may touch the handle */
} PartitionReader;

#define MAX_MESSAGES_PER_READ (1 << 20)

static void drop_pending(PartitionReader *self) {
    for (size_t i = self->next; i < self->count; i++) rk.message_destroy(self->pending[i]);
    self->count = self->next = 0;
}

static void shut(PartitionReader *self) {
    if (self->handle == NULL) return;
    drop_pending(self);
    rd_kafka_t *handle = self->handle;
    rd_kafka_queue_t *queue = self->queue;
    self->handle = NULL;
    self->queue = NULL;
    Py_BEGIN_ALLOW_THREADS
    rk.queue_destroy(queue);
    rk.consumer_close(handle);
    rk.destroy(handle);
    Py_END_ALLOW_THREADS
}

static void reader_dealloc(PartitionReader *self) {
    shut(self);
    PyMem_Free(self->pending);
    PyMem_Free(self->topic);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_init(PartitionReader *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"config", "topic", "partition", "start", NULL};
    PyObject *config;
    const char *topic;
    int partition;
    long long start;
    char errstr[512];
    if (!loaded) {
        PyErr_SetString(PyExc_RuntimeError, "call load() with the path of librdkafka first");
        return -1;
    }
    if (self->handle != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PartitionReader is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!siL", kwlist, &PyDict_Type, &config, &topic,
                                     &partition, &start))
        return -1;
    rd_kafka_conf_t *conf = rk.conf_new();
    PyObject *name, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &name, &value)) {
        const char *n = PyUnicode_AsUTF8(name);
        const char *v = n ? PyUnicode_AsUTF8(value) : NULL;
        if (v == NULL) {
            rk.conf_destroy(conf);
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "config names and values must be str");
            }
            return -1;
        }
        if (rk.conf_set(conf, n, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
            rk.conf_destroy(conf);
            PyErr_SetString(PyExc_ValueError, errstr);
            return -1;
        }
    }
    rd_kafka_t *handle = rk.new_handle(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (handle == NULL) { /* conf is still ours on failure */
        rk.conf_destroy(conf);
        PyErr_SetString(PyExc_ValueError, errstr);
        return -1;
    }
    rk.poll_set_consumer(handle);
    rd_kafka_topic_partition_list_t *assignment = rk.list_new(1);
    rk.list_add(assignment, topic, partition)->offset = start;
    int err = rk.assign(handle, assignment);
    rk.list_destroy(assignment);
    if (err) {
        rk.destroy(handle);
        PyErr_Format(PyExc_RuntimeError, "assigning %s:%d failed: %s", topic, partition, rk.err2str(err));
        return -1;
    }
    PyMem_Free(self->topic); /* __init__ again after close() */
    self->topic = PyMem_Malloc(strlen(topic) + 1);
    if (self->topic == NULL) {
        rk.destroy(handle);
        PyErr_NoMemory();
        return -1;
    }
    strcpy(self->topic, topic);
    self->partition = partition;
    self->handle = handle;
    self->queue = rk.queue_get_consumer(handle);
    return 0;
}

static int ensure_open(PartitionReader *self) {
    if (self->handle == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PartitionReader is closed");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PartitionReader is in use by another thread");
        return 0;
    }
    return 1;
}

static PyObject *new_bytes(Py_ssize_t size, char **data) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, size);
    if (b != NULL) *data = PyBytes_AS_STRING(b);
    return b;
}

/* Copy one column of keys (is_key) or values into Arrow binary buffers. */
static int binary_column(rd_kafka_message_t **msgs, Py_ssize_t n, int is_key, PyObject **validity,
                         Py_ssize_t *nulls, PyObject **offsets, PyObject **data) {
    size_t total = 0;
    Py_ssize_t missing = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        void *ptr = is_key ? msgs[i]->key : msgs[i]->payload;
        if (ptr == NULL) missing++;
        total += is_key ? msgs[i]->key_len : msgs[i]->len;
    }
    char *offs_raw = NULL, *bytes = NULL, *bits = NULL;
    if ((*offsets = new_bytes((n + 1) * sizeof(int32_t), &offs_raw)) == NULL) return -1;
    if ((*data = new_bytes((Py_ssize_t)total, &bytes)) == NULL) return -1;
    *validity = missing ? new_bytes((n + 7) / 8, &bits) : (Py_INCREF(Py_None), Py_None);
    if (*validity == NULL) return -1;
    if (bits) memset(bits, 0, (n + 7) / 8);
    int32_t *offs = (int32_t *)offs_raw;
    int32_t at = 0;
    offs[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        void *ptr = is_key ? msgs[i]->key : msgs[i]->payload;
        size_t len = is_key ? msgs[i]->key_len : msgs[i]->len;
        if (ptr != NULL) {
            memcpy(bytes + at, ptr, len);
            at += (int32_t)len;
            if (bits) bits[i >> 3] |= (char)(1 << (i & 7));
        }
        offs[i + 1] = at;
    }
    *nulls = missing;
    return 0;
}

static PyObject *error_event(rd_kafka_message_t *m) {
    PyObject *reason = (m->payload != NULL && m->len > 0)
                           ? PyUnicode_DecodeUTF8((const char *)m->payload, (Py_ssize_t)m->len, "replace")
                           : PyUnicode_FromString(rk.err2str(m->err));
    if (reason == NULL) return NULL;
    return Py_BuildValue("(iLN)", m->err, (long long)m->offset, reason);
}

/*
 * read(max_messages, timeout_ms, end, max_bytes) -> (count, events, key_validity, key_nulls,
 *     key_offsets, key_data, value_validity, value_nulls, value_offsets, value_data,
 *     offsets, timestamps_us, timestamp_types, beyond_end)
 *
 * Records at offsets >= end are dropped (beyond_end counts them); error events
 * (end of partition, out of range, ...) come back as (code, offset, reason) tuples.
 * A batch stops before its keys or values would pass max_bytes; the rest waits for the
 * next call, which hands out those leftovers before consuming again (max_messages bounds
 * what is consumed, not the leftovers). timestamp_types are Spark's (-1 none, 0 create time,
 * 1 log append time).
 */
static PyObject *reader_read(PartitionReader *self, PyObject *args) {
    Py_ssize_t max_messages, max_bytes;
    int timeout_ms;
    long long end;
    if (!PyArg_ParseTuple(args, "niLn", &max_messages, &timeout_ms, &end, &max_bytes)) return NULL;
    if (!ensure_open(self)) return NULL;
    if (max_messages < 1 || max_messages > MAX_MESSAGES_PER_READ || max_bytes < 1 || max_bytes > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_messages must be in [1, 2**20] and max_bytes in [1, 2**31)");
        return NULL;
    }
    if (self->next >= self->count) {
        self->count = self->next = 0;
        if ((size_t)max_messages > self->capacity) {
            rd_kafka_message_t **grown = PyMem_Realloc(self->pending, max_messages * sizeof(*grown));
            if (grown == NULL) return PyErr_NoMemory();
            self->pending = grown;
            self->capacity = (size_t)max_messages;
        }
        ssize_t got;
        self->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        got = rk.consume_batch_queue(self->queue, timeout_ms, self->pending, (size_t)max_messages);
        Py_END_ALLOW_THREADS
        self->busy = 0;
        if (got < 0) {
            PyErr_SetString(PyExc_RuntimeError, "rd_kafka_consume_batch_queue failed");
            return NULL;
        }
        self->count = (size_t)got;
    }
    PyObject *events = PyList_New(0);
    rd_kafka_message_t **accepted = PyMem_Malloc((self->count - self->next + 1) * sizeof(*accepted));
    if (events == NULL || accepted == NULL) {
        Py_XDECREF(events);
        PyMem_Free(accepted);
        return PyErr_NoMemory();
    }
    Py_ssize_t n = 0, beyond = 0;
    size_t key_bytes = 0, value_bytes = 0;
    while (self->next < self->count) {
        rd_kafka_message_t *m = self->pending[self->next];
        if (m->err) {
            PyObject *event = error_event(m);
            if (event == NULL || PyList_Append(events, event) < 0) {
                Py_XDECREF(event);
                goto fail;
            }
            Py_DECREF(event);
            rk.message_destroy(m);
        } else if (m->offset >= end) {
            beyond++;
            rk.message_destroy(m);
        } else {
            if (n > 0 && (key_bytes + m->key_len > (size_t)max_bytes ||
                          value_bytes + m->len > (size_t)max_bytes))
                break; /* full: the rest stays pending */
            key_bytes += m->key_len;
            value_bytes += m->len;
            accepted[n++] = m;
        }
        self->next++;
    }
    PyObject *kv = NULL, *ko = NULL, *kd = NULL, *vv = NULL, *vo = NULL, *vd = NULL;
    PyObject *offsets = NULL, *stamps = NULL, *kinds = NULL;
    Py_ssize_t key_nulls = 0, value_nulls = 0;
    char *o_raw, *s_raw, *k_raw;
    if (binary_column(accepted, n, 1, &kv, &key_nulls, &ko, &kd) < 0 ||
        binary_column(accepted, n, 0, &vv, &value_nulls, &vo, &vd) < 0 ||
        (offsets = new_bytes(n * sizeof(int64_t), &o_raw)) == NULL ||
        (stamps = new_bytes(n * sizeof(int64_t), &s_raw)) == NULL ||
        (kinds = new_bytes(n * sizeof(int32_t), &k_raw)) == NULL) {
        Py_XDECREF(kv); Py_XDECREF(ko); Py_XDECREF(kd);
        Py_XDECREF(vv); Py_XDECREF(vo); Py_XDECREF(vd);
        Py_XDECREF(offsets); Py_XDECREF(stamps); Py_XDECREF(kinds);
        goto fail;
    }
    int64_t *o = (int64_t *)o_raw, *s = (int64_t *)s_raw;
    int32_t *k = (int32_t *)k_raw;
    for (Py_ssize_t i = 0; i < n; i++) {
        int kind = 0;
        o[i] = accepted[i]->offset;
        /* ms -> Spark's µs. No timestamp (-1) becomes -1000 µs: Spark's JVM source makes a
         * Timestamp of -1 ms too, and the Python reader does the same. */
        s[i] = rk.message_timestamp(accepted[i], &kind) * 1000;
        k[i] = kind - 1; /* librdkafka 0/1/2 (none/create/log append) -> Spark -1/0/1 */
        rk.message_destroy(accepted[i]);
    }
    PyMem_Free(accepted);
    return Py_BuildValue("(nNNnNNNnNNNNNn)", n, events, kv, key_nulls, ko, kd, vv, value_nulls, vo,
                         vd, offsets, stamps, kinds, beyond);
fail:
    /* Out of memory: the accepted messages are freed and the consumer has moved past them, so
     * the task must fail (the MemoryError does that); its retry reads the range again. */
    for (Py_ssize_t i = 0; i < n; i++) rk.message_destroy(accepted[i]);
    PyMem_Free(accepted);
    Py_DECREF(events);
    return NULL;
}

static PyObject *reader_watermarks(PartitionReader *self, PyObject *args) {
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "i", &timeout_ms)) return NULL;
    if (!ensure_open(self)) return NULL;
    int64_t low = -1, high = -1;
    int err;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    err = rk.query_watermark_offsets(self->handle, self->topic, self->partition, &low, &high, timeout_ms);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (err) return Py_BuildValue("(iLLs)", err, (long long)low, (long long)high, rk.err2str(err));
    return Py_BuildValue("(iLLs)", 0, (long long)low, (long long)high, "");
}

/*
 * cached_watermarks() -> (error code, low, high): the partition's watermarks as the consumer's last
 * fetch answer gave them (librdkafka keeps them per partition); no broker round trip. -1001 (no
 * offset) until a fetch has answered.
 */
static PyObject *reader_cached_watermarks(PartitionReader *self, PyObject *unused) {
    (void)unused;
    if (!ensure_open(self)) return NULL;
    int64_t low = -1001, high = -1001;
    int err = rk.get_watermark_offsets(self->handle, self->topic, self->partition, &low, &high);
    return Py_BuildValue("(iLL)", err, (long long)low, (long long)high);
}

/*
 * assign(start): read the same partition from offset start, dropping whatever was consumed or
 * fetched before (the cached consumer of a new batch). assign(None): stop fetching and drop the
 * queue, keeping the client and its broker connections for a later assign (an idle cached
 * consumer neither fetches nor holds records). Both are local: no broker round trip here.
 */
static PyObject *reader_assign(PartitionReader *self, PyObject *args) {
    PyObject *start;
    if (!PyArg_ParseTuple(args, "O", &start)) return NULL;
    if (!ensure_open(self)) return NULL;
    long long offset = 0;
    if (start != Py_None) {
        offset = PyLong_AsLongLong(start);
        if (offset == -1 && PyErr_Occurred()) return NULL;
    }
    drop_pending(self);
    rd_kafka_topic_partition_list_t *assignment = NULL;
    if (start != Py_None) {
        assignment = rk.list_new(1);
        rk.list_add(assignment, self->topic, self->partition)->offset = offset;
    }
    int err;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    err = rk.assign(self->handle, assignment);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (assignment != NULL) rk.list_destroy(assignment);
    if (err) {
        PyErr_Format(PyExc_RuntimeError, "assigning %s:%d failed: %s", self->topic, (int)self->partition,
                     rk.err2str(err));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *reader_close(PartitionReader *self, PyObject *unused) {
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "PartitionReader is in use by another thread");
        return NULL;
    }
    shut(self);
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"read", (PyCFunction)reader_read, METH_VARARGS, "Consume up to max_messages into Arrow buffers."},
    {"watermarks", (PyCFunction)reader_watermarks, METH_VARARGS,
     "(error code, low, high, error text) of the partition, asked of the broker."},
    {"cached_watermarks", (PyCFunction)reader_cached_watermarks, METH_NOARGS,
     "(error code, low, high) of the partition from the consumer's last fetch answer; no broker call."},
    {"assign", (PyCFunction)reader_assign, METH_VARARGS,
     "Read from this offset on, dropping what was fetched (None: stop fetching, keep the client)."},
    {"close", (PyCFunction)reader_close, METH_NOARGS, "Close the consumer (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PartitionReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "airflow_kafka_stream.source._kafka_arrow.PartitionReader",
    .tp_doc = "A librdkafka consumer assigned to one partition from a start offset.",
    .tp_basicsize = sizeof(PartitionReader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS, "Bind librdkafka at this path; returns its version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kafka_arrow",
    .m_doc = "Kafka partitions read into Arrow buffers in C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__kafka_arrow(void) {
    if (PyType_Ready(&PartitionReaderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PartitionReaderType);
    if (PyModule_AddObject(m, "PartitionReader", (PyObject *)&PartitionReaderType) < 0) {
        Py_DECREF(&PartitionReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
