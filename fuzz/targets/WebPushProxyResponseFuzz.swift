import PushCore
import PushHTTP

/// Any status, headers and body: the Web Push and push-proxy classifiers (compiled in from
/// Plugins/WebPush and Plugins/Proxy) return a result carrying that status and never trap;
/// a retryable result's Retry-After hint is never negative. Input: two status bytes, a
/// header count, (name, value) pairs, the rest is the body.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebPushProxyResponses(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let status = Int(Int16(bitPattern: UInt16(input.byte()) << 8 | UInt16(input.byte())))
    var headers: [(name: String, value: String)] = []
    for _ in 0..<(input.byte() % 8) {
        let name = input.string()
        headers.append((name.lowercased(), input.string()))
    }
    let response = HTTPResponse(status: status, headers: headers, body: input.rest())
    for result in [WebPushProvider.classify(response), ProxyProvider.classify(response)] {
        precondition(result.httpStatus == status, "\(result) for status \(status)")
        if case .retryable(_, _, let retryAfter?) = result {
            precondition(retryAfter >= .zero, "negative Retry-After \(retryAfter)")
            _ = retryAfter.milliseconds
        }
    }
    return 0
}
