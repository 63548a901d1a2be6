/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-protocol.h - the NBD wire format (NetworkBlockDevice/nbd
 * doc/proto.md): fixed newstyle handshake, options, requests and simple and
 * structured replies.  Every multi-byte field travels big-endian: structs
 * here hold wire (network order) values; convert with htobe*()/be*toh() at
 * the point of use.  Each struct's size is pinned with _Static_assert.
 */
#ifndef TIERD_NBD_PROTOCOL_H
#define TIERD_NBD_PROTOCOL_H

#include <stdint.h>

/* ---- handshake ---- */
#define NBD_MAGIC          UINT64_C(0x4e42444d41474943)  /* "NBDMAGIC" */
#define NBD_NEW_VERSION    UINT64_C(0x49484156454f5054)  /* "IHAVEOPT" */
#define NBD_REP_MAGIC      UINT64_C(0x0003e889045565a9)

/* server handshake flags (16 bit) */
#define NBD_FLAG_FIXED_NEWSTYLE  (1u << 0)
#define NBD_FLAG_NO_ZEROES       (1u << 1)
/* client flags (32 bit) */
#define NBD_FLAG_C_FIXED_NEWSTYLE NBD_FLAG_FIXED_NEWSTYLE
#define NBD_FLAG_C_NO_ZEROES      NBD_FLAG_NO_ZEROES
#define NBD_FLAG_C_MASK           (NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)

struct nbd_new_handshake {
	uint64_t nbdmagic;      /* NBD_MAGIC */
	uint64_t version;       /* NBD_NEW_VERSION */
	uint16_t gflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_new_handshake) == 18, "nbd_new_handshake");

/* options */
#define NBD_OPT_EXPORT_NAME       1
#define NBD_OPT_ABORT             2
#define NBD_OPT_LIST              3
#define NBD_OPT_PEEK_EXPORT       4
#define NBD_OPT_STARTTLS          5
#define NBD_OPT_INFO              6
#define NBD_OPT_GO                7
#define NBD_OPT_STRUCTURED_REPLY  8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT  10
#define NBD_OPT_EXTENDED_HEADERS  11

struct nbd_new_option {
	uint64_t version;       /* NBD_NEW_VERSION */
	uint32_t option;
	uint32_t optlen;        /* bytes of option data that follow */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_new_option) == 16, "nbd_new_option");

/* option replies */
#define NBD_REP_ACK          1
#define NBD_REP_SERVER       2
#define NBD_REP_INFO         3
#define NBD_REP_META_CONTEXT 4
#define NBD_REP_ERR(v)       ((UINT32_C(1) << 31) | (v))
#define NBD_REP_ERR_UNSUP           NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY          NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID         NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM        NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD        NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN         NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN        NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG         NBD_REP_ERR(9)

struct nbd_fixed_new_option_reply {
	uint64_t magic;         /* NBD_REP_MAGIC */
	uint32_t option;        /* the option being answered */
	uint32_t reply;         /* NBD_REP_* */
	uint32_t replylen;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_fixed_new_option_reply) == 20, "option reply");

/* NBD_OPT_INFO / NBD_OPT_GO information types */
#define NBD_INFO_EXPORT      0
#define NBD_INFO_NAME        1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE  3

struct nbd_fixed_new_option_reply_info_export {
	uint16_t info;          /* NBD_INFO_EXPORT */
	uint64_t exportsize;
	uint16_t eflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_fixed_new_option_reply_info_export) == 12, "info export");

struct nbd_fixed_new_option_reply_info_block_size {
	uint16_t info;          /* NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;
	uint32_t preferred;
	uint32_t maximum;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_fixed_new_option_reply_info_block_size) == 14, "info bs");

/* Answer to NBD_OPT_EXPORT_NAME (followed by 124 zero bytes unless NO_ZEROES). */
struct nbd_new_handshake_finish {
	uint64_t exportsize;
	uint16_t eflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_new_handshake_finish) == 10, "handshake finish");
#define NBD_HANDSHAKE_ZEROES 124

/* transmission (export) flags, 16 bit */
#define NBD_FLAG_HAS_FLAGS          (1u << 0)
#define NBD_FLAG_READ_ONLY          (1u << 1)
#define NBD_FLAG_SEND_FLUSH         (1u << 2)
#define NBD_FLAG_SEND_FUA           (1u << 3)
#define NBD_FLAG_ROTATIONAL         (1u << 4)
#define NBD_FLAG_SEND_TRIM          (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES  (1u << 6)
#define NBD_FLAG_SEND_DF            (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN     (1u << 8)
#define NBD_FLAG_SEND_RESIZE        (1u << 9)
#define NBD_FLAG_SEND_CACHE         (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO     (1u << 11)

/* ---- transmission ---- */
#define NBD_REQUEST_MAGIC           UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC      UINT32_C(0x67446698)
#define NBD_STRUCTURED_REPLY_MAGIC  UINT32_C(0x668e33ef)

struct nbd_request {
	uint32_t magic;         /* NBD_REQUEST_MAGIC */
	uint16_t flags;         /* NBD_CMD_FLAG_* */
	uint16_t type;          /* NBD_CMD_* */
	uint64_t cookie;        /* echoed in the reply */
	uint64_t offset;
	uint32_t count;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request) == 28, "nbd_request");

#define NBD_CMD_READ          0
#define NBD_CMD_WRITE         1
#define NBD_CMD_DISC          2
#define NBD_CMD_FLUSH         3
#define NBD_CMD_TRIM          4
#define NBD_CMD_CACHE         5
#define NBD_CMD_WRITE_ZEROES  6
#define NBD_CMD_BLOCK_STATUS  7

#define NBD_CMD_FLAG_FUA       (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE   (1u << 1)
#define NBD_CMD_FLAG_DF        (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE   (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

struct nbd_simple_reply {
	uint32_t magic;         /* NBD_SIMPLE_REPLY_MAGIC */
	uint32_t error;         /* NBD_E* */
	uint64_t cookie;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_simple_reply) == 16, "nbd_simple_reply");

struct nbd_structured_reply {
	uint32_t magic;         /* NBD_STRUCTURED_REPLY_MAGIC */
	uint16_t flags;         /* NBD_REPLY_FLAG_* */
	uint16_t type;          /* NBD_REPLY_TYPE_* */
	uint64_t cookie;
	uint32_t length;        /* payload bytes that follow */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_structured_reply) == 20, "nbd_structured_reply");

#define NBD_REPLY_FLAG_DONE          (1u << 0)
#define NBD_REPLY_TYPE_NONE          0
#define NBD_REPLY_TYPE_OFFSET_DATA   1
#define NBD_REPLY_TYPE_OFFSET_HOLE   2
#define NBD_REPLY_TYPE_BLOCK_STATUS  5
#define NBD_REPLY_TYPE_ERROR         ((1u << 15) + 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET  ((1u << 15) + 2)

struct nbd_structured_reply_offset_data {
	uint64_t offset;        /* followed by the data */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_structured_reply_offset_data) == 8, "offset data");

struct nbd_structured_reply_error {
	uint32_t error;         /* NBD_E* */
	uint16_t len;           /* message bytes that follow (we send none) */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_structured_reply_error) == 6, "reply error");

/* errors on the wire (Linux values, fixed by the protocol) */
#define NBD_SUCCESS     0
#define NBD_EPERM       1
#define NBD_EIO         5
#define NBD_ENOMEM      12
#define NBD_EINVAL      22
#define NBD_ENOSPC      28
#define NBD_EOVERFLOW   75
#define NBD_ENOTSUP     95
#define NBD_ESHUTDOWN   108

/* limits this server applies */
#define NBD_MAX_STRING       4096                 /* export names (proto.md) */
#define NBD_MAX_BLOCK_SIZE   (64u * 1024 * 1024)  /* largest READ/WRITE payload */
#define NBD_PREF_BLOCK_SIZE  4096u

#endif
