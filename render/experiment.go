package render

func (e *Engine) experimentInput(obj map[string]any, res Resolved, in map[string]any) []FieldError {
	return nil
}
