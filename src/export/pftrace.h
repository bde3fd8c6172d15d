/*
 * pftrace.h - the Perfetto protobuf field numbers loom writes and reads,
 * from perfetto_trace.proto (package perfetto.protos).
 */
#ifndef LOOM_PFTRACE_H
#define LOOM_PFTRACE_H

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

enum {
  PF_TRACE_PACKET = 1,
  /* TracePacket */
  PF_PKT_TIMESTAMP = 8,
  PF_PKT_SEQ_ID = 10,          /* trusted_packet_sequence_id */
  PF_PKT_TRACK_EVENT = 11,
  PF_PKT_INTERNED_DATA = 12,
  PF_PKT_SEQUENCE_FLAGS = 13,
  PF_PKT_CLOCK_SNAPSHOT = 6,
  PF_PKT_TIMESTAMP_CLOCK_ID = 58,
  PF_PKT_DEFAULTS = 59,        /* trace_packet_defaults */
  PF_PKT_TRACK_DESCRIPTOR = 60,
  PF_PKT_CHROME_EVENTS = 5,    /* ChromeEventBundle: loom's header */
  /* ChromeEventBundle, ChromeMetadata */
  PF_CEB_METADATA = 2,
  PF_CM_NAME = 1,
  PF_CM_STRING = 2,
  PF_SEQ_INCREMENTAL_STATE_CLEARED = 1,
  PF_SEQ_NEEDS_INCREMENTAL_STATE = 2,
  /* TracePacketDefaults */
  PF_TPD_TIMESTAMP_CLOCK_ID = 58,
  PF_TPD_TRACK_EVENT_DEFAULTS = 11,
  PF_TED_TRACK_UUID = 11,      /* TrackEventDefaults: the sequence's default track */
  /* ClockSnapshot and ClockSnapshot.Clock */
  PF_CS_CLOCKS = 1,
  PF_CS_PRIMARY = 2,
  PF_CLK_ID = 1,
  PF_CLK_TIMESTAMP = 2,
  PF_CLK_INCREMENTAL = 3,
  PF_CLK_UNIT_MULTIPLIER = 4,  /* unit_multiplier_ns */
  PF_CLOCK_REALTIME = 1,
  PF_CLOCK_BOOTTIME = 6,
  PF_CLOCK_LOOM = 64,          /* sequence-scoped, incremental, ns */
  /* TrackDescriptor */
  PF_TD_UUID = 1,
  PF_TD_NAME = 2,
  PF_TD_PROCESS = 3,
  PF_TD_THREAD = 4,
  PF_TD_PARENT_UUID = 5,
  PF_TD_COUNTER = 8,
  PF_TD_DESCRIPTION = 14,
  /* ProcessDescriptor */
  PF_PD_PID = 1,
  PF_PD_NAME = 6,
  PF_PD_LABELS = 8,
  /* ThreadDescriptor */
  PF_THD_PID = 1,
  PF_THD_TID = 2,
  PF_THD_NAME = 5,
  /* TrackEvent */
  PF_TE_CATEGORY_IIDS = 3,
  PF_TE_DEBUG_ANNOTATIONS = 4,
  PF_TE_TYPE = 9,
  PF_TE_NAME_IID = 10,
  PF_TE_TRACK_UUID = 11,
  PF_TE_NAME = 23,
  PF_TE_CATEGORIES = 22,
  PF_TE_COUNTER_VALUE = 30,
  PF_TE_DOUBLE_COUNTER_VALUE = 44,
  PF_TE_FLOW_IDS_OLD = 36,     /* varint: what loom writes (trace_processor reads both) */
  PF_TE_TERMINATING_FLOW_IDS_OLD = 42,
  PF_TE_FLOW_IDS = 47,         /* fixed64: what loom wrote before */
  PF_TE_TERMINATING_FLOW_IDS = 48,
  PF_TE_LEGACY_EVENT = 6,
  PF_LE_PHASE = 2,             /* LegacyEvent: 'X', a complete event */
  PF_LE_DURATION_US = 3,
  PF_TYPE_SLICE_BEGIN = 1,
  PF_TYPE_SLICE_END = 2,
  PF_TYPE_INSTANT = 3,
  PF_TYPE_COUNTER = 4,
  /* DebugAnnotation */
  PF_DA_NAME_IID = 1,
  PF_DA_BOOL = 2,
  PF_DA_UINT = 3,
  PF_DA_INT = 4,
  PF_DA_DOUBLE = 5,
  PF_DA_STRING = 6,
  PF_DA_POINTER = 7,
  PF_DA_NESTED = 8,       /* NestedValue (older producers) */
  PF_DA_LEGACY_JSON = 9,
  PF_DA_NAME = 10,
  PF_DA_DICT_ENTRIES = 11,
  PF_DA_ARRAY_VALUES = 12,
  PF_DA_STRING_VALUE_IID = 17, /* InternedData.debug_annotation_string_values */
  /* NestedValue */
  PF_NV_TYPE = 1,         /* 1 dict, 2 array, else a leaf */
  PF_NV_DICT_KEYS = 2,
  PF_NV_DICT_VALUES = 3,
  PF_NV_ARRAY_VALUES = 4,
  PF_NV_INT = 5,
  PF_NV_DOUBLE = 6,
  PF_NV_BOOL = 7,
  PF_NV_STRING = 8,
  /* Device processes get pid + this in ProcessDescriptor/ThreadDescriptor:
   * Perfetto treats pid 0 as the idle process, and devices are numbered
   * from 0 (Kineto's convention).  Readers subtract it. */
  PF_DEVICE_PID_BASE = 0x70000000,
  /* Tracks of a process (not of a thread) are read as threads numbered
   * from here, as the JSON reader numbers string tids. */
  PF_SYNTH_TID = 1000000000,
  /* InternedData; each entry is {iid = 1, name = 2} */
  PF_ID_EVENT_CATEGORIES = 1,
  PF_ID_EVENT_NAMES = 2,
  PF_ID_DEBUG_ANNOTATION_NAMES = 3,
  PF_ID_DEBUG_ANNOTATION_STRING_VALUES = 29,
  /* CPU samples: TracePacket.perf_sample and the profiling tables of
   * InternedData (profile_common.proto); strings are {iid = 1, str = 2} */
  PF_PKT_PERF_SAMPLE = 66,
  PF_PS_PID = 2,
  PF_PS_TID = 3,
  PF_PS_CALLSTACK_IID = 4,
  PF_ID_FUNCTION_NAMES = 5,
  PF_ID_FRAMES = 6,
  PF_ID_CALLSTACKS = 7,
  PF_ID_MAPPING_PATHS = 17,
  PF_ID_MAPPINGS = 19,
  PF_MAP_IID = 1,
  PF_MAP_PATH_STRING_IDS = 7,  /* the path's components; loom writes one */
  PF_FRAME_IID = 1,
  PF_FRAME_FUNCTION_NAME_ID = 2,
  PF_FRAME_MAPPING_ID = 3,
  PF_FRAME_REL_PC = 4,
  PF_CALLSTACK_IID = 1,
  PF_CALLSTACK_FRAME_IDS = 2   /* outermost frame first */
};

/* The ChromeMetadata entry holding the JSON writer's top-level keys. */
#define PF_HEADER_NAME "loom_header"
/* TrackDescriptor.description of a thread's tracks of overlapping slices. */
#define PF_LANE_DESC "loom: slices overlapping their parent"

/* A flow id the writer made unique (pftrace_write.c, pf_flow_ids). */
#define PF_FLOW_DUP (1ull << 63)

#endif
