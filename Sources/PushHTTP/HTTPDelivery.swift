import PushCore

/// The shared half of every HTTP provider plugin: send the request, turn transport
/// failures into retryable results, and let the plugin classify real answers.
public enum HTTPDelivery {
    public static func send(_ request: HTTPRequest, over transport: any HTTPTransport,
                            classify: (HTTPResponse) -> DeliveryResult) async -> DeliveryResult {
        do {
            return classify(try await transport.send(request))
        } catch .invalidRequest(let detail) {
            return .failed(reason: "invalid request: \(detail)", httpStatus: nil)
        } catch {
            return .retryable(reason: error.description, httpStatus: nil)
        }
    }

    /// The response's `Retry-After`, if it has a valid one.
    public static func retryAfter(_ response: HTTPResponse) -> Duration? {
        RetryAfter.parse(response.header("retry-after"))
    }
}
