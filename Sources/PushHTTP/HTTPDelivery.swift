import PushCore

/// The shared half of every HTTP provider plugin: send the request, turn transport
/// failures into retryable results, and let the plugin classify real answers.
public enum HTTPDelivery {
    /// Sends `delivery`'s request at the delivery's lane (urgent requests get streams first) and classifies the answer.
    /// (The request is moved to the lane, and the answer or error read, out of line: a job in flight keeps this
    /// function's async frame.)
    public static func send(
        _ request: HTTPRequest, for delivery: Delivery, over transport: any HTTPTransport,
        classify: (HTTPResponse) -> DeliveryResult
    ) async -> DeliveryResult {
        do {
            return classify(try await transport.send(atLane(request, delivery.lane)))
        } catch {
            return result(of: error)
        }
    }

    @inline(never)
    static func atLane(_ request: HTTPRequest, _ lane: Lane) -> HTTPRequest {
        var request = request
        request.lane = lane
        return request
    }

    @inline(never)
    static func result(of error: HTTPTransportError) -> DeliveryResult {
        if case .invalidRequest(let detail) = error { return .failed(reason: "invalid request: \(detail)", httpStatus: nil) }
        return .retryable(reason: error.description, httpStatus: nil)
    }

    /// The response's `Retry-After`, if it has a valid one.
    public static func retryAfter(_ response: HTTPResponse) -> Duration? {
        RetryAfter.parse(response.header("retry-after"))
    }
}
