import Foundation
import PushCore

/// The fields of a Google service-account JSON file that the OAuth2 JWT-bearer grant needs.
public struct ServiceAccount: Sendable, Equatable {
    public var projectId: String
    public var clientEmail: String
    public var privateKeyId: String
    public var privateKeyPEM: String
    public var tokenURI: String

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public init(projectId: String, clientEmail: String, privateKeyId: String, privateKeyPEM: String, tokenURI: String) {
        self.projectId = projectId
        self.clientEmail = clientEmail
        self.privateKeyId = privateKeyId
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
    }

    public init(json bytes: [UInt8]) throws(Invalid) {
        guard let document = try? JSONParser.parse(bytes), case .object = document else {
            throw Invalid(description: "not a JSON object")
        }
        func field(_ name: String) throws(Invalid) -> String {
            guard case .string(let value)? = document[name], !value.isEmpty else {
                throw Invalid(description: "\(name) is missing")
            }
            return value
        }
        if case .string(let type)? = document["type"], type != "service_account" {
            throw Invalid(description: "type is \"\(type)\", not \"service_account\"")
        }
        self.init(
            projectId: try field("project_id"), clientEmail: try field("client_email"),
            privateKeyId: try field("private_key_id"), privateKeyPEM: try field("private_key"),
            tokenURI: try field("token_uri"))
        guard tokenURI.hasPrefix("https://") else { throw Invalid(description: "token_uri must be https") }
    }

    public init(contentsOfFile path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Invalid(description: "\(path) does not exist or is not readable")
        }
        try self.init(json: Array(data))
    }
}
