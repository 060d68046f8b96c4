/// Who a connection speaks for, beside its host, port and TLS options: two requests of different identities never
/// share a connection. APNs binds a connection to the signing key of the first provider token sent on it ("The key
/// ID in the provider token isn't related to the key ID of the token used in the first push of this connection",
/// 403 `UnrelatedKeyIdInToken`, Apple's "Handling notification responses from APNs"), so a token-authenticated
/// app's requests carry its key's identity; a client certificate's identity is the SHA-256 of the bytes its connections
/// use (read once with the configuration version), so a rotated certificate gets connections of its own while requests
/// in flight finish on the old ones.
/// Set by a provider's code from its configuration, never from a job.
public struct ConnectionIdentity: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String) { self.value = value }

    public var description: String { value }
}
