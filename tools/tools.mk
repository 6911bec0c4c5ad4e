# Assembler sources of the xprobes tool.  Included by the top-level
# Makefile (after B is set).  A .S file goes through the C preprocessor,
# so it can use <sys/syscall.h>'s SYS_* names.
TOOL_ASM_OBJS := $(B)/tools/inject_code.o

$(B)/xprobes: $(TOOL_ASM_OBJS)

$(B)/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(TOOL_ASM_OBJS:.o=.d)
