import PushCore

/// Every linked plugin's target format, as the worker's decoder has them (the plugins' target files are
/// compiled into each fuzzer that decodes jobs).
extension JobDecoder {
    init() {
        self.init(
            formats: TargetFormats([
                APNsTargetFormat(), FCMTargetFormat(), WebPushTargetFormat(), ProxyTargetFormat(),
                HMSTargetFormat(),
            ]))
    }
}

/// The provider names a fuzzed native target may carry.
let fuzzProviders = ["apns", "fcm", "webpush", "proxy", "hms"]
