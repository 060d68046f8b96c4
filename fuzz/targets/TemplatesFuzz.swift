import PushCore

/// Operator templates and job values through PushTemplates (compiled in, over the Mustache
/// module of hummingbird's swift-mustache): any template text is compiled and checked, or
/// refused with a reason, and a compiled one renders any accepted job's values to JSON of
/// the provider's shape or to a failure, never a trap. Input: provider, kind, template
/// text, then a delivery (see FuzzJob.swift).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTemplates(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let shapes: [any TemplateShape] = [APNsTemplateShape(), FCMTemplateShape()]
    let shape = shapes[Int(input.byte()) % shapes.count]
    let provider = shape.provider
    let kind = JobKind.allCases[Int(input.byte()) % JobKind.allCases.count]
    let text = input.string()
    guard let template = try? PayloadTemplate(text: text, shape: shape, app: "com.example.app", kind: kind,
                                              source: "\(provider.rawValue)/com.example.app/\(kind.rawValue).mustache"),
          let delivery = input.delivery()
    else { return 0 }
    if case .success(let rendered) = template.render(PayloadKeywords(delivery: delivery, app: "com.example.app")) {
        _ = rendered.bytes(removing: ["headers"])
    }
    return 0
}
