#include "backup/codec.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "quorate/fs.h"
#include "quorate/text.h"

namespace quorate {
namespace {

constexpr size_t kOutChunk = 64 * 1024;
// Inflate's output per call: large, so that a call's fixed cost and the Write down the chain are paid
// once per 256 KiB.
constexpr size_t kInflateOut = 256 * 1024;
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr int kZstdWindowLog = 19;
// zstd's input reaches its thread in pieces of four of etcd's 32 KiB messages, four queued: each
// piece handed over wakes the other thread, and in pieces of one message the two threads and etcd
// spent their time switching on two cores (a 128 MB backup on a quiet machine took 0.60 s against
// etcdctl's 0.46 s uncompressed; 0.50 s now, 0.55 s with eight pieces of 32 KiB, no better with
// pieces of 256 KiB or eight queued). 768 KiB of buffers where the default handoff's take 1.5 MiB.
constexpr HandoffSize kZstdHandoff = {128 * 1024, 4};

std::string Hex(const unsigned char* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

// How many cores compression may use: etcd's snapshot stream arrives on one thread, and a backup
// should cost no more time than that stream, so compression runs beside it on the other cores.
unsigned CompressionWorkers() { return std::clamp(std::thread::hardware_concurrency(), 1u, 4u); }

// gzip (what etcd-manager's etcd.backup.gz and `gunzip` read), compressed on several cores the way
// pigz does it: the stream is cut into chunks, each deflated on its own with the previous chunk's
// last 32 KiB as its dictionary and ended on a byte boundary (a sync flush), so the pieces joined
// in order are one ordinary deflate stream; one header, and a trailer with the CRC-32 combined
// from the chunks'. Readers see a single gzip member, as from `gzip` itself.
class GzipCompressor : public Sink {
 public:
  explicit GzipCompressor(Sink& next) : next_(next), max_in_flight_(CompressionWorkers() + 1) {
    // The threads are made once per stream (a thread per chunk would be some 500 per 64 MB). One
    // that cannot be made leaves fewer workers, down to none: then each chunk is deflated on this
    // thread as it is dispatched, slower but the same bytes.
    for (unsigned i = 0; i < CompressionWorkers(); ++i) {
      try {
        workers_.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        break;
      }
    }
    if (workers_.empty()) own_ = std::make_unique<Deflater>();
    chunk_.reserve(kChunk);
  }
  ~GzipCompressor() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;  // a chain dropped on an error: what is queued is not wanted any more
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }
  Status Write(std::string_view bytes) override {
    while (!bytes.empty()) {
      size_t take = std::min(bytes.size(), kChunk - chunk_.size());
      chunk_.append(bytes.data(), take);
      bytes.remove_prefix(take);
      if (chunk_.size() == kChunk) {
        if (Status s = Dispatch(/*last=*/false); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  Status Finish() override {
    if (Status s = Dispatch(/*last=*/true); !s.ok()) return s;
    while (!in_flight_.empty()) {
      if (Status s = EmitOldest(); !s.ok()) return s;
    }
    unsigned char trailer[8];
    for (int i = 0; i < 4; ++i) {
      trailer[i] = static_cast<unsigned char>(crc_ >> (8 * i));
      trailer[4 + i] = static_cast<unsigned char>(total_ >> (8 * i));  // ISIZE: the length mod 2^32
    }
    if (Status s = next_.Write({reinterpret_cast<char*>(trailer), sizeof trailer}); !s.ok()) return s;
    return next_.Finish();
  }

 private:
  // What one job deflates. Each chunk in flight holds it twice (in, and out as deflated), beside a
  // deflate state of 268 KiB per worker. 128 KiB, pigz's default, for 256 KiB: `backup save` of
  // 128 MB on two cores peaks at 2.5 MiB of heap against 3.35 MiB (heaptrack), for the 32 KiB of
  // dictionary each chunk primes its state with (some 5% more time).
  static constexpr size_t kChunk = 128 << 10;
  static constexpr size_t kWindow = 32 * 1024;  // deflate's window: all a chunk may refer back to

  // A raw deflate state, made once per worker and reset for each chunk: made per chunk, its 268 KiB
  // came and went in each worker thread's malloc arena, which kept the pages.
  struct Deflater {
    Deflater() { ready = deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK; }
    ~Deflater() {
      if (ready) deflateEnd(&z);
    }
    Deflater(const Deflater&) = delete;
    Deflater& operator=(const Deflater&) = delete;
    z_stream z{};
    bool ready = false;
  };

  struct Piece {
    std::string deflated;
    uLong crc = 0;
    size_t in_bytes = 0;
    bool ok = false;
  };

  static Piece Deflate(Deflater& deflater, std::string in, std::string dictionary, bool last) {
    Piece piece;
    piece.in_bytes = in.size();
    piece.crc = crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(in.data()), in.size());
    z_stream& z = deflater.z;
    if (!deflater.ready || deflateReset(&z) != Z_OK) return piece;
    if (!dictionary.empty() &&
        deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(dictionary.data()),
                             static_cast<uInt>(dictionary.size())) != Z_OK) {
      return piece;
    }
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    piece.deflated.resize(deflateBound(&z, in.size()));
    size_t produced = 0;
    int rc;
    do {  // deflate's bound leaves out the sync flush's few bytes: grow when it asks for more room
      if (produced == piece.deflated.size()) piece.deflated.resize(piece.deflated.size() + 4096);
      z.next_out = reinterpret_cast<Bytef*>(piece.deflated.data() + produced);
      z.avail_out = static_cast<uInt>(piece.deflated.size() - produced);
      rc = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
      produced = piece.deflated.size() - z.avail_out;
    } while (z.avail_out == 0 && rc == Z_OK);
    // Z_BUF_ERROR: a flush that had already filled the buffer exactly found nothing left to write.
    piece.ok = (last ? rc == Z_STREAM_END : rc == Z_OK || rc == Z_BUF_ERROR) && z.avail_in == 0;
    piece.deflated.resize(produced);
    return piece;
  }

  Status Dispatch(bool last) {
    if (!header_written_) {
      // The header zlib writes for a gzip stream: no name, no time, made on Unix.
      static constexpr unsigned char kHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
      if (Status s = next_.Write({reinterpret_cast<const char*>(kHeader), sizeof kHeader}); !s.ok()) return s;
      header_written_ = true;
    }
    if (in_flight_.size() >= max_in_flight_) {
      if (Status s = EmitOldest(); !s.ok()) return s;
    }
    std::string dictionary = dictionary_;
    // Every chunk but the last is whole, so the next one's dictionary is this one's tail.
    dictionary_ = chunk_.substr(chunk_.size() - std::min(kWindow, chunk_.size()));
    Job job([in = std::move(chunk_), dictionary = std::move(dictionary), last](Deflater& deflater) mutable {
      return Deflate(deflater, std::move(in), std::move(dictionary), last);
    });
    // Whole from the start: grown by etcd's 32 KiB messages, it was copied twice more on the way.
    chunk_.clear();
    chunk_.reserve(kChunk);
    in_flight_.push_back(job.get_future());
    if (workers_.empty()) {
      job(*own_);
      return Status::Ok();
    }
    {
      std::lock_guard lock(mu_);
      queued_.push_back(std::move(job));
    }
    wake_.notify_one();
    return Status::Ok();
  }

  void Work() {
    Deflater deflater;
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
        if (stopping_) return;
        job = std::move(queued_.front());
        queued_.pop_front();
      }
      job(deflater);
    }
  }

  Status EmitOldest() {
    Piece piece = in_flight_.front().get();
    in_flight_.pop_front();
    if (!piece.ok) return Status::Internal("gzip: deflate failed");
    crc_ = crc32_combine(crc_, piece.crc, static_cast<z_off_t>(piece.in_bytes));
    total_ += piece.in_bytes;
    return next_.Write(piece.deflated);
  }

  Sink& next_;
  const size_t max_in_flight_;
  std::string chunk_;
  std::string dictionary_;
  std::deque<std::future<Piece>> in_flight_;
  std::mutex mu_;
  std::condition_variable wake_;
  using Job = std::packaged_task<Piece(Deflater&)>;
  std::deque<Job> queued_;
  bool stopping_ = false;
  // Started in the constructor's body, once every member is made; joined in the destructor.
  std::vector<std::thread> workers_;
  std::unique_ptr<Deflater> own_;  // where no worker could be made: this thread's
  bool header_written_ = false;
  uLong crc_ = 0;
  uint64_t total_ = 0;
};

// Reading a backup back is inflate-bound (a restore spends most of its own time here): ISA-L's
// inflate takes well under half of zlib's CPU on etcd's data (`backup verify` of 256 MB, inflate and
// hash: 0.69 s against 1.40 s). It checks the gzip header, the CRC-32 and the length in the trailer
// as zlib does; one member, nothing after it.
const char* InflateError(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK: return "an invalid deflate block";
    case ISAL_INVALID_SYMBOL: return "an invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK: return "a distance back past the start";
    case ISAL_INVALID_WRAPPER: return "no gzip header";
    case ISAL_UNSUPPORTED_METHOD: return "a compression method other than deflate";
    case ISAL_INCORRECT_CHECKSUM: return "its CRC-32 or length does not match";
    default: return "inflate failed";
  }
}

class GzipDecompressor : public Sink {
 public:
  explicit GzipDecompressor(Sink& next) : next_(next), state_(std::make_unique<inflate_state>()) {
    isal_inflate_init(state_.get());
    state_->crc_flag = ISAL_GZIP;
  }
  Status Write(std::string_view bytes) override {
    if (ended_ && !bytes.empty()) return Status::DataLoss("gzip: bytes after the end of the stream");
    state_->next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
    state_->avail_in = static_cast<uint32_t>(bytes.size());
    // Until the input is used up and the output no longer fills the buffer (ISA-L holds back what
    // did not fit, and gives it on the next call).
    while (!ended_) {
      state_->next_out = reinterpret_cast<uint8_t*>(out_.data());
      state_->avail_out = static_cast<uint32_t>(out_.size());
      int rc = isal_inflate(state_.get());
      if (rc < 0) {
        return Status::DataLoss(fmt::format("not a gzip stream, or a damaged one ({})", InflateError(rc)));
      }
      const size_t n = out_.size() - state_->avail_out;
      if (n > 0) {
        if (Status s = next_.Write({out_.data(), n}); !s.ok()) return s;
      }
      ended_ = state_->block_state == ISAL_BLOCK_FINISH;
      if (state_->avail_in == 0 && n < out_.size()) break;
    }
    if (ended_ && state_->avail_in > 0) return Status::DataLoss("gzip: bytes after the end of the stream");
    return Status::Ok();
  }
  Status Finish() override {
    if (!ended_) return Status::DataLoss("the gzip stream is cut short");
    return next_.Finish();
  }

 private:
  Sink& next_;
  std::unique_ptr<inflate_state> state_;  // some 40 KiB: on the heap
  bool ended_ = false;
  std::vector<char> out_ = std::vector<char>(kInflateOut);
};

class ZstdCompressor : public Sink {
 public:
  explicit ZstdCompressor(Sink& next) : next_(next), cctx_(ZSTD_createCCtx()) {
    // Level 3's default window for a stream of unknown size is 2 MiB, all of it copied into a
    // context of 3.6 MiB; a 512 KiB window makes the context 2.1 MiB, and compresses etcd's data
    // about as well as the 512 KiB jobs with 256 KiB of overlap that zstd's own worker thread used
    // to compress in (a 128 MB database of the bench's: 97.11 MB against 97.07 MB with the 2 MiB
    // window). That worker, its round buffer and its jobs' outputs came to 4.45 MiB of heap.
    (void)ZSTD_CCtx_setParameter(cctx_, ZSTD_c_windowLog, kZstdWindowLog);
  }
  ~ZstdCompressor() override { ZSTD_freeCCtx(cctx_); }
  Status Write(std::string_view bytes) override { return Run(bytes, ZSTD_e_continue); }
  Status Finish() override {
    if (Status s = Run({}, ZSTD_e_end); !s.ok()) return s;
    return next_.Finish();
  }

 private:
  Status Run(std::string_view bytes, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    size_t remaining;
    do {
      ZSTD_outBuffer out{out_, sizeof out_, 0};
      remaining = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(remaining)) return Status::Internal(fmt::format("zstd: {}", ZSTD_getErrorName(remaining)));
      if (out.pos > 0) {
        if (Status s = next_.Write({out_, out.pos}); !s.ok()) return s;
      }
    } while (mode == ZSTD_e_end ? remaining != 0 : in.pos < in.size);
    return Status::Ok();
  }
  Sink& next_;
  ZSTD_CCtx* cctx_;
  char out_[kOutChunk];
};

class ZstdDecompressor : public Sink {
 public:
  explicit ZstdDecompressor(Sink& next) : next_(next), dctx_(ZSTD_createDCtx()) {}
  ~ZstdDecompressor() override { ZSTD_freeDCtx(dctx_); }
  Status Write(std::string_view bytes) override {
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    while (in.pos < in.size) {
      ZSTD_outBuffer out{out_, sizeof out_, 0};
      size_t rc = ZSTD_decompressStream(dctx_, &out, &in);
      if (ZSTD_isError(rc)) {
        return Status::DataLoss(fmt::format("not a zstd stream, or a damaged one ({})", ZSTD_getErrorName(rc)));
      }
      frame_done_ = rc == 0;
      if (out.pos > 0) {
        if (Status s = next_.Write({out_, out.pos}); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  Status Finish() override {
    // Output still held inside zstd is flushed by calls with no input.
    while (!frame_done_) {
      ZSTD_inBuffer in{nullptr, 0, 0};
      ZSTD_outBuffer out{out_, sizeof out_, 0};
      size_t rc = ZSTD_decompressStream(dctx_, &out, &in);
      if (ZSTD_isError(rc) || out.pos == 0) return Status::DataLoss("the zstd stream is cut short");
      frame_done_ = rc == 0;
      if (Status s = next_.Write({out_, out.pos}); !s.ok()) return s;
    }
    return next_.Finish();
  }

 private:
  Sink& next_;
  ZSTD_DCtx* dctx_;
  bool frame_done_ = false;
  char out_[kOutChunk];
};

class GcmCipher : public Sink {
 public:
  GcmCipher(const BackupKey& key, Sink& next, bool encrypt) : key_(key), next_(next), encrypt_(encrypt) {
    ctx_ = EVP_CIPHER_CTX_new();
  }
  ~GcmCipher() override { EVP_CIPHER_CTX_free(ctx_); }

  Status Write(std::string_view bytes) override {
    if (encrypt_) {
      if (!started_) {
        unsigned char nonce[kNonceBytes];
        if (RAND_bytes(nonce, sizeof nonce) != 1) return Status::Internal("no random bytes for a nonce");
        if (Status s = Start(nonce); !s.ok()) return s;
        if (Status s = next_.Write({reinterpret_cast<char*>(nonce), sizeof nonce}); !s.ok()) return s;
      }
      return Update(bytes);
    }
    // Decrypting: the nonce leads, and the last 16 bytes seen may be the tag, so they are held back.
    held_.append(bytes);
    if (!started_) {
      if (held_.size() < kNonceBytes) return Status::Ok();
      if (Status s = Start(reinterpret_cast<const unsigned char*>(held_.data())); !s.ok()) return s;
      held_.erase(0, kNonceBytes);
    }
    if (held_.size() <= kTagBytes) return Status::Ok();
    size_t n = held_.size() - kTagBytes;
    Status s = Update({held_.data(), n});
    held_.erase(0, n);
    return s;
  }

  Status Finish() override {
    int len = 0;
    if (encrypt_) {
      if (!started_) {
        if (Status s = Write({}); !s.ok()) return s;
      }
      unsigned char tag[kTagBytes];
      if (EVP_EncryptFinal_ex(ctx_, out_, &len) != 1 ||
          EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1) {
        return Status::Internal("AES-256-GCM: finishing failed");
      }
      if (Status s = next_.Write({reinterpret_cast<char*>(tag), sizeof tag}); !s.ok()) return s;
      return next_.Finish();
    }
    if (!started_ || held_.size() != kTagBytes) return Status::DataLoss("the encrypted backup is cut short");
    if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kTagBytes, held_.data()) != 1 ||
        EVP_DecryptFinal_ex(ctx_, out_, &len) != 1) {
      return Status::DataLoss(fmt::format(
          "the backup does not decrypt with key {}: its bytes were changed, or it was sealed with another key", key_.id));
    }
    return next_.Finish();
  }

 private:
  Status Start(const unsigned char* nonce) {
    started_ = true;
    auto init = encrypt_ ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
    if (init(ctx_, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
        init(ctx_, nullptr, nullptr, key_.bytes.data(), nonce) != 1) {
      return Status::Internal("AES-256-GCM: set-up failed");
    }
    return Status::Ok();
  }
  Status Update(std::string_view bytes) {
    while (!bytes.empty()) {
      size_t take = std::min(bytes.size(), kOutChunk);
      int len = 0;
      auto update = encrypt_ ? EVP_EncryptUpdate : EVP_DecryptUpdate;
      if (update(ctx_, out_, &len, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(take)) != 1) {
        return Status::Internal("AES-256-GCM: update failed");
      }
      if (Status s = next_.Write({reinterpret_cast<char*>(out_), static_cast<size_t>(len)}); !s.ok()) return s;
      bytes.remove_prefix(take);
    }
    return Status::Ok();
  }

  BackupKey key_;
  Sink& next_;
  bool encrypt_;
  bool started_ = false;
  EVP_CIPHER_CTX* ctx_;
  std::string held_;
  unsigned char out_[kOutChunk + 32];
};

class HandoffSink : public Sink {
 public:
  HandoffSink(Sink& next, HandoffSize size) : next_(next), size_(size) {
    filling_.reserve(size_.piece);
    try {
      worker_ = std::thread([this] { Work(); });
    } catch (const std::system_error&) {
      // No thread: Write passes straight on.
    }
  }
  ~HandoffSink() override { StopWorker(/*dropped=*/true); }

  Status Write(std::string_view bytes) override {
    if (!worker_.joinable()) return failed().ok() ? next_.Write(bytes) : failed();
    while (!bytes.empty()) {
      const size_t take = std::min(bytes.size(), size_.piece - filling_.size());
      filling_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (filling_.size() == size_.piece) {
        if (Status s = Send(); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }

  Status Finish() override {
    if (worker_.joinable()) {
      if (!filling_.empty()) {
        if (Status s = Send(); !s.ok()) return s;
      }
      // The thread passes on at most the piece it holds; the rest is passed here, at once, rather
      // than after the wake-ups of a thread that may be waiting for a core.
      StopWorker(/*dropped=*/false);
      while (true) {
        auto passed = PassOldest();
        if (!passed.ok()) return passed.status();
        if (!*passed) break;
      }
    }
    if (Status s = failed(); !s.ok()) return s;  // an earlier Finish's, or the thread's
    return next_.Finish();
  }

 private:
  Status failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

  // Queues the piece being filled and takes a free buffer. When the queue is full the thread is
  // behind (on a busy machine, waiting for a core while the caller has one): the caller then
  // passes the oldest piece on itself, so the stream never waits on the thread's wake-up.
  Status Send() {
    bool full;
    {
      std::lock_guard lock(mu_);
      if (!failed_.ok()) return failed_;
      queued_.push_back(std::move(filling_));
      if (free_.empty()) {
        filling_ = std::string();
        filling_.reserve(size_.piece);
      } else {
        filling_ = std::move(free_.back());
        free_.pop_back();
      }
      full = queued_.size() > size_.buffers;
    }
    queued_or_stopping_.notify_one();
    if (!full) return Status::Ok();
    return PassOldest().status();
  }

  // Passes the oldest queued piece to next, on whichever thread calls: one piece at a time, in
  // order (pass_mu_). False when none was queued; next's error stops the stream.
  Result<bool> PassOldest() {
    std::lock_guard pass(pass_mu_);
    std::string piece;
    {
      std::lock_guard lock(mu_);
      if (!failed_.ok()) return failed_;
      if (queued_.empty()) return false;
      piece = std::move(queued_.front());
      queued_.pop_front();
    }
    Status s = next_.Write(piece);
    piece.clear();  // its capacity is kept for the next piece
    std::lock_guard lock(mu_);
    free_.push_back(std::move(piece));
    if (s.ok()) return true;
    failed_ = s;
    queued_.clear();
    return s;
  }

  void Work() {
    for (;;) {
      {
        std::unique_lock lock(mu_);
        queued_or_stopping_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
        if (stopping_) return;
      }
      if (!PassOldest().ok()) return;
    }
  }

  // Once the piece the thread holds is passed on: `dropped`, the queue goes with the sink; else the
  // caller passes what is left.
  void StopWorker(bool dropped) {
    if (!worker_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      if (dropped) queued_.clear();
    }
    queued_or_stopping_.notify_one();
    worker_.join();
  }

  Sink& next_;
  const HandoffSize size_;
  std::string filling_;  // the caller's: the piece being gathered
  std::mutex pass_mu_;   // held while a piece is passed on, by either thread
  std::mutex mu_;        // the rest below
  std::condition_variable queued_or_stopping_;
  std::deque<std::string> queued_;
  std::vector<std::string> free_;  // buffers passed on, kept for reuse
  Status failed_ = Status::Ok();   // next's first error
  bool stopping_ = false;
  // Started in the constructor's body, once every member is made; joined by Finish or the destructor.
  std::thread worker_;
};

// zstd compresses on a thread of its own, beside the one that reads etcd's stream and hashes it,
// as zstd's own worker did, in a single context: the stream's thread hands the pieces over.
class ThreadedZstdCompressor : public Sink {
 public:
  explicit ThreadedZstdCompressor(Sink& next) : zstd_(next), handoff_(MakeHandoff(zstd_, kZstdHandoff)) {}
  Status Write(std::string_view bytes) override { return handoff_->Write(bytes); }
  Status Finish() override { return handoff_->Finish(); }

 private:
  ZstdCompressor zstd_;
  std::unique_ptr<Sink> handoff_;  // after zstd_: stopped before it goes
};

}  // namespace

const char* CompressionName(Compression c) { return c == Compression::kGzip ? "gzip" : "zstd"; }

Result<Compression> ParseCompression(const std::string& name) {
  if (name == "gzip") return Compression::kGzip;
  if (name == "zstd") return Compression::kZstd;
  return Status::InvalidArgument(fmt::format("compression '{}' is not gzip or zstd", Printable(name, 32)));
}

std::unique_ptr<Sink> MakeCompressor(Compression c, Sink& next) {
  if (c == Compression::kGzip) return std::make_unique<GzipCompressor>(next);
  return std::make_unique<ThreadedZstdCompressor>(next);
}

std::unique_ptr<Sink> MakeHandoff(Sink& next, HandoffSize size) { return std::make_unique<HandoffSink>(next, size); }

std::unique_ptr<Sink> MakeDecompressor(Compression c, Sink& next) {
  if (c == Compression::kGzip) return std::make_unique<GzipDecompressor>(next);
  return std::make_unique<ZstdDecompressor>(next);
}

BackupKey BackupKeyFromBytes(const std::array<unsigned char, 32>& bytes) {
  BackupKey key;
  key.bytes = bytes;
  const std::string label = "quorate backup key";
  std::string input = label + std::string(1, '\0') + std::string(reinterpret_cast<const char*>(bytes.data()), 32);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  key.id = Hex(digest, 8);
  return key;
}

Result<BackupKey> LoadBackupKey(const std::string& path) {
  auto text = ReadFile(path, 4096);
  if (!text.ok()) {
    return Status::InvalidArgument(fmt::format("--backup-key-file {}: {}", Printable(path, 200), text.status().message()));
  }
  std::array<unsigned char, 32> bytes{};
  std::string content = *text;
  if (content.size() == 32) {
    std::memcpy(bytes.data(), content.data(), 32);
    return BackupKeyFromBytes(bytes);
  }
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r')) content.pop_back();
  bool hex = content.size() == 64 && content.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  if (!hex) {
    return Status::InvalidArgument(fmt::format(
        "--backup-key-file {}: holds {} bytes; a key is 32 bytes, raw or as 64 hex digits (openssl rand -hex 32)",
        Printable(path, 200), text->size()));
  }
  for (size_t i = 0; i < 32; ++i) bytes[i] = static_cast<unsigned char>(std::stoi(content.substr(2 * i, 2), nullptr, 16));
  return BackupKeyFromBytes(bytes);
}

Result<std::vector<BackupKey>> LoadBackupKeys(const std::vector<std::string>& paths) {
  std::vector<BackupKey> keys;
  for (const std::string& path : paths) {
    auto key = LoadBackupKey(path);
    if (!key.ok()) return key.status();
    keys.push_back(*key);
  }
  return keys;
}

std::unique_ptr<Sink> MakeEncryptor(const BackupKey& key, Sink& next) {
  return std::make_unique<GcmCipher>(key, next, /*encrypt=*/true);
}

std::unique_ptr<Sink> MakeDecryptor(const BackupKey& key, Sink& next) {
  return std::make_unique<GcmCipher>(key, next, /*encrypt=*/false);
}

struct SnapshotCheck::Hasher {
  Hasher() : ctx(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Hasher() { EVP_MD_CTX_free(ctx); }
  EVP_MD_CTX* ctx;
};

SnapshotCheck::SnapshotCheck(Sink* next) : next_(next), hasher_(std::make_unique<Hasher>()) {}

SnapshotCheck::~SnapshotCheck() = default;

Status SnapshotCheck::Write(std::string_view bytes) {
  if (next_ != nullptr) {
    if (Status s = next_->Write(bytes); !s.ok()) return s;
  }
  // Everything but the last 32 bytes is the database. A piece of 32 bytes or more is hashed where it
  // lies, all but its own last 32 (held back as the tail): copying the whole stream through the
  // tail cost a pass over the database.
  if (bytes.size() >= kSnapshotHashBytes) {
    const size_t n = bytes.size() - kSnapshotHashBytes;
    EVP_DigestUpdate(hasher_->ctx, tail_.data(), tail_.size());
    EVP_DigestUpdate(hasher_->ctx, bytes.data(), n);
    db_bytes_ += tail_.size() + n;
    tail_.assign(bytes.substr(n));
    return Status::Ok();
  }
  tail_.append(bytes);
  if (tail_.size() > kSnapshotHashBytes) {
    size_t n = tail_.size() - kSnapshotHashBytes;
    EVP_DigestUpdate(hasher_->ctx, tail_.data(), n);
    db_bytes_ += n;
    tail_.erase(0, n);
  }
  return Status::Ok();
}

Status SnapshotCheck::Finish() {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  EVP_DigestFinal_ex(hasher_->ctx, digest, nullptr);
  sha256_hex_ = Hex(digest, sizeof digest);
  if (tail_.size() != kSnapshotHashBytes || std::memcmp(tail_.data(), digest, kSnapshotHashBytes) != 0) {
    return Status::DataLoss(fmt::format(
        "the snapshot's sha256 does not match the one etcd appended to it ({} bytes of database): it is damaged",
        db_bytes_));
  }
  return next_ == nullptr ? Status::Ok() : next_->Finish();
}

}  // namespace quorate
