import PushCore

/// Operator templates, job values and job overrides through PushTemplates (compiled in, over the
/// Mustache module of hummingbird's swift-mustache) and PushCore: any template text is compiled
/// and checked, or refused with a reason, and a compiled one renders any accepted job's values to
/// JSON of the provider's shape or to a failure, never a trap; an override (RFC 7396) merges into
/// what was rendered and into the job's fitted alert, and into a document beside it, with the
/// result `referenceMerge` gives. Input: provider, kind, template text, a delivery (see
/// FuzzJob.swift), then a document and an override: JSON texts, or objects of up to 12 000
/// generated members (an override is outside input, and merging once took quadratic time).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTemplates(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let shapes: [any TemplateShape] = [APNsTemplateShape(), FCMTemplateShape()]
    let shape = shapes[Int(input.byte()) % shapes.count]
    let provider = shape.provider
    let kind = JobKind.allCases[Int(input.byte()) % JobKind.allCases.count]
    let text = input.string()
    let template = try? PayloadTemplate(
        text: text, shape: shape, app: "com.example.app", kind: kind,
        source: "\(provider.rawValue)/com.example.app/\(kind.rawValue).mustache")
    let delivery = input.delivery()
    let (document, override) = input.mergeCase()
    let merged = document.merging(override)
    precondition(merged == referenceMerge(document, override), "the merge differs from RFC 7396's")
    guard let delivery else { return 0 }
    if let template, case .success(let rendered) = template.render(PayloadKeywords(delivery: delivery, app: "com.example.app")) {
        _ = PayloadOverride.apply(override, to: rendered.bytes(removing: ["headers"]))
    }
    let limit = Int(input.byte()) * 64
    if case .success(let fitted) = AlertFitting.fit(
        delivery.job.notification, limit: limit, override: override,
        build: { delivery.replacingNotification($0).job.summaryJSON() })
    {
        precondition(fitted.payload.count <= limit, "a fitted payload is larger than its limit")
    }
    return 0
}

/// RFC 7396 section 2's MergePatch written member by member from the target's side (names are unique,
/// as `JSONParser` and `mergeCase` give them): each target member is kept, merged or removed where it
/// stands, then the patch's new members follow in the patch's order.
func referenceMerge(_ target: JSONValue, _ patch: JSONValue) -> JSONValue {
    guard case .object(let patchMembers) = patch else { return patch }
    let targetMembers: [(key: String, value: JSONValue)]
    if case .object(let members) = target { targetMembers = members } else { targetMembers = [] }
    let patchValues = Dictionary(patchMembers.map { ($0.key, $0.value) }) { first, _ in first }
    var result: [(key: String, value: JSONValue)] = []
    for member in targetMembers {
        guard let value = patchValues[member.key] else {
            result.append(member)
            continue
        }
        if case .null = value { continue }
        result.append((member.key, referenceMerge(member.value, value)))
    }
    let targetNames = Set(targetMembers.map(\.key))
    for member in patchMembers where !targetNames.contains(member.key) {
        if case .null = member.value { continue }
        result.append((member.key, referenceMerge(.null, member.value)))
    }
    return .object(result)
}

extension FuzzInput {
    /// A document and an override: a selector byte, then either two JSON texts (a text that does not
    /// parse reads as an empty object) or two generated objects sharing their names' prefix.
    mutating func mergeCase() -> (document: JSONValue, override: JSONValue) {
        if byte() & 1 == 0 {
            let document = (try? JSONParser.parse(data())) ?? .object([])
            return (document, (try? JSONParser.parse(data())) ?? .object([]))
        }
        let prefix = String(string().prefix(8))
        let document = generatedObject(prefix: prefix)
        return (document, generatedObject(prefix: prefix))
    }

    /// Up to 12 000 members named `<prefix><n>`, n stepping by 1 to 4 from an offset, so two of them
    /// share some names; values from a small palette (nulls, scalars, nested objects with a null).
    private mutating func generatedObject(prefix: String) -> JSONValue {
        let count = (Int(byte()) << 8 | Int(byte())) % 12_001
        let step = Int(byte() % 4) + 1
        let offset = Int(byte())
        let salt = Int(byte())
        return .object(
            (0..<count).map { index in
                let value: JSONValue =
                    switch (index + salt) % 6 {
                    case 0: .null
                    case 1: .integer(Int64(index))
                    case 2: .string("v\(index)")
                    case 3: .object([("n", .integer(Int64(index))), ("gone", .null)])
                    case 4: .array([.null, .bool(true)])
                    default: .object([])
                    }
                return ("\(prefix)\(offset + index * step)", value)
            })
    }
}
