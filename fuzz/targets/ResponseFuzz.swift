import PushCore
import PushHTTP

/// Any status, Retry-After and body: each provider's response classifier (APNs, FCM, Huawei's result codes and
/// partial-success lists) returns a
/// classified result, never traps. The first two bytes pick the status, the next byte the
/// length of a Retry-After value (its high bit: send the header at all — parsing an
/// HTTP-date builds DateFormatters, ~50x slower than the rest, so only some inputs do), the
/// rest is the body.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponses(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard bytes.count >= 3 else { return 0 }
    let status = 100 + (Int(bytes[0]) << 8 | Int(bytes[1])) % 500
    let retryAfterLength = min(Int(bytes[2] & 0x7F), bytes.count - 3)
    let retryAfter = String(decoding: bytes[3..<(3 + retryAfterLength)], as: UTF8.self)
    let body = Array(bytes[(3 + retryAfterLength)...])
    let headers = (bytes[2] & 0x80 != 0 ? [("retry-after", retryAfter)] : []) + [("apns-id", "x")]
    let response = HTTPResponse(status: status, headers: headers, body: body)
    _ = APNsResponse.classify(response)
    _ = FCMResponse.classify(response)
    _ = FCMResponse.errorBody(body)
    let huawei = HMSAnswer(response)
    _ = HMSResponse.classify(huawei, token: "IQAAAACy0kYk", targetNamesApp: bytes[2] & 0x40 != 0)
    _ = huawei.listsIllegal("IQAAAACy0kYk")
    if let delay = HTTPDelivery.retryAfter(response) { precondition(delay >= .zero) }
    return 0
}
