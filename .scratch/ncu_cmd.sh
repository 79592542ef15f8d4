tar xJf build-cuda/slim.tar.xz -C build-cuda && export LD_LIBRARY_PATH=$PWD/build-cuda/slim/lib TANDEM_SOURCE_DIR=$PWD; C=build-cuda/slim; cat $C/COMMIT; which ncu || ls /usr/local/cuda/bin | grep -i ncu
for R in 2 24 33 34; do echo "== ring $R"; TANDEM_QBENCH_DECODE=1 TANDEM_QUANT_RING=$R $C/kernel_bench --quant-only --quick > $OUT/q_$R.txt 2>&1; grep -E "routed experts (FP8|MXFP4 W4A16)|^(q_a|o_proj|q_b)[^ ]* [^ ]+ +1 " $OUT/q_$R.txt | cut -c1-110 | sed -E 's/ +/ /g'; done
$C/ops_tests --gtest_filter='CudaQuant.RingDepth*' 2>&1 | tail -2
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
run() { echo "=== $1 (batch $2)"; TANDEM_QBENCH_DECODE=1 TANDEM_QBENCH_BATCHES=$2 timeout 200 ncu --kernel-name-base mangled -k regex:"$1" --launch-count 2 --metrics "$M" $C/kernel_bench --quant-only --quick > $OUT/ncu_$3.txt 2>&1; grep -E "q_moe|q_gemv|duration|dram__|warps_active|issue_active|registers|inst_executed|stalled" $OUT/ncu_$3.txt | grep -vE " 0$|  0(\.0+)?$" | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/\(unsigned.*//' | awk '{$1=$1};1' | cut -c1-100; }
run "q_moe_kernel.*Fp8" 1 fp8_b1
run "q_moe_kernel.*Mx4" 32 mx4_b32
run "q_moe_kernel.*Fp8" 32 fp8_b32
