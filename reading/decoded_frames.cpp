#include "reading/decoded_frames.h"

namespace torchprof {

DecodedFrames::DecodedFrames(CaptureReader& reader, const std::vector<FrameRef>& frames, Mode mode)
    : reader_(reader), frames_(frames), dctx_(ZSTD_createDCtx(), ZSTD_freeDCtx) {
  const bool threaded = mode == Mode::kAhead && frames.size() >= kThreadedFrames;
  ring_.resize(threaded ? kAhead : 1);
  if (threaded) thread_ = std::thread([this] { run(); });
}

DecodedFrames::~DecodedFrames() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DecodedFrames::decode(size_t k, Frame& into) {
  const FrameRef& ref = frames_[k];
  into.ok = reader_.read_body_at(ref.offset, ref.size, body_) &&
            decode_frame(body_.data(), body_.size(), dctx_.get(), scratch_, into.header, into.raw);
}

DecodedFrames::Frame* DecodedFrames::next() {
  if (handed_ == frames_.size()) return nullptr;
  if (!thread_.joinable()) {
    decode(handed_++, ring_[0]);
    return &ring_[0];
  }
  std::unique_lock<std::mutex> lock(mu_);
  released_ = handed_;  // the frame handed out last time is done with
  changed_.notify_all();
  changed_.wait(lock, [&] { return decoded_ > handed_ || error_; });
  if (error_) std::rethrow_exception(error_);
  return &ring_[handed_++ % kAhead];
}

void DecodedFrames::run() {
  for (size_t k = 0; k < frames_.size(); ++k) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Frame k takes the slot of frame k - kAhead, which must be released.
      changed_.wait(lock, [&] { return k < released_ + kAhead || stop_; });
      if (stop_) return;
    }
    try {
      decode(k, ring_[k % kAhead]);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    decoded_ = k + 1;
    changed_.notify_all();
  }
}

}  // namespace torchprof
